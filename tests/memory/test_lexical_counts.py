"""The lexical index's document counts (issue 16): a common term's count is kept for a while (counting
it reads its whole posting list), a rare one is always counted afresh, and a kept count is dropped
when the scope's size moves. COMMON_DF is lowered here so that a few episodes make a term common."""

from __future__ import annotations

import pytest

from memconsole.memory import episodes, lexical

pytestmark = pytest.mark.django_db


@pytest.fixture
def common_at_three(monkeypatch):
    monkeypatch.setattr(lexical, "COMMON_DF", 3)
    monkeypatch.setattr(lexical, "common_counts", {})


def _count_of(keys, term: str) -> int:
    return lexical.LexicalQuery.build(keys.user_key, term).frequencies[f"#{term[:2]}"]


def test_a_rare_word_is_found_the_moment_it_is_written(keys, system, common_at_three):
    for day in ("monday", "tuesday", "wednesday", "thursday"):
        episodes.remember(keys, system, f"the kettle broke on {day}")
    assert lexical.LexicalQuery.build(keys.user_key, "the kettle broke").candidates(5)  # common counts kept

    written = episodes.remember(keys, system, "the zeppelin landed").episode
    found = lexical.LexicalQuery.build(keys.user_key, "zeppelin")

    assert found.candidates(5) == [written.pk]


def test_a_kept_count_is_recounted_when_the_scope_changes_size(keys, system, common_at_three):
    made = [episodes.remember(keys, system, f"kettle number {i}").episode for i in range(4)]
    for i in range(2):
        episodes.remember(keys, system, f"teapot number {i}")
    assert _count_of(keys, "kettle") == 4  # kept: a common term

    made[0].delete()
    made[1].delete()  # 4 episodes left, 2 with the word

    assert _count_of(keys, "kettle") == 2


def test_a_kept_count_never_exceeds_the_scope(keys, system, common_at_three, monkeypatch):
    for i in range(4):
        episodes.remember(keys, system, f"kettle number {i}")
    query = lexical.LexicalQuery.build(keys.user_key, "kettle")
    token = query.tokens["#ke"]
    monkeypatch.setitem(lexical.common_counts, token, (50, query.scope_size, lexical.common_counts[token][2]))

    again = lexical.LexicalQuery.build(keys.user_key, "kettle")

    assert again.frequencies["#ke"] == again.scope_size == 4
    assert all(weight >= 0 for weight in again.weights.values())
