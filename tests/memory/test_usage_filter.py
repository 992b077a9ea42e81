"""The usage filters of `EpisodeFilter` (issue 18): used in the last N days, never used; validated,
counted exactly for "used", and scoped to the memory whose injections used the episode."""

from __future__ import annotations

import pytest
from django.db import connection

from memconsole.memory import bulk, queries
from memconsole.memory.errors import ValidationError
from memconsole.memory.filters import EpisodeFilter
from tests.console.test_usage_filters import injected
from tests.factories import plain_episodes

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"used_within_days": 0}, "used_within_days"),
        ({"used_within_days": 366}, "used_within_days"),
        ({"used_within_days": "7"}, "used_within_days"),
        ({"used_within_days": True}, "used_within_days"),
        ({"never_used": "yes"}, "never_used"),
        ({"never_used": True, "used_within_days": 7}, "never_used"),
    ],
)
def test_it_refuses_bad_usage_filters_naming_the_field(keys, filters, field):
    with pytest.raises(ValidationError) as refused:
        EpisodeFilter.build(keys, **filters)
    assert refused.value.field == field


def test_used_and_never_used_split_the_scope_by_its_own_injections(keys, other_keys):
    rows = plain_episodes(keys, 6)
    injected(keys, rows[:2], days_ago=1)
    injected(keys, rows[2:3], days_ago=10)
    injected(other_keys, rows[3:4])  # another space naming this one's episode: no use here
    page, count = queries.episode_page(keys, used_within_days=7)
    assert [e.episode_id for e in page.items] == [rows[1].episode_id, rows[0].episode_id]
    assert (count.matching, count.total, count.estimated) == (2, 6, False)
    assert queries.episode_count(keys, used_within_days=30).matching == 3
    never = queries.episode_page(keys, never_used=True)[0]
    assert {e.episode_id for e in never.items} == {r.episode_id for r in rows[3:]}
    assert queries.episode_page(other_keys, used_within_days=7)[0].items == []  # not an episode of that space


def test_bulk_by_filter_previews_what_the_usage_filter_lists(keys):
    rows = plain_episodes(keys, 5)
    injected(keys, rows[:1])
    preview = bulk.preview_matching(keys, "archive", {"never_used": True})
    assert set(preview.ids) == {r.episode_id for r in rows[1:]}


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's planner; PostgreSQL plans from statistics")
@pytest.mark.parametrize("order", [("-timestamp", "-id"), ("-importance", "-id"), ("-id",)])
def test_used_in_the_last_n_days_looks_the_used_episodes_up_by_id(keys, order):
    """Not a walk of the order's (user_key, ...) index past every unused episode (tests/memory/test_query_plans.py)."""
    rows = plain_episodes(keys, 3)
    injected(keys, rows[:1])
    where = EpisodeFilter.build(keys, statuses=["active"], used_within_days=7)
    text = where.episodes().order_by(*order)[:26].explain()
    assert "memory_episode_episode_id_key" in text or "sqlite_autoindex_memory_episode" in text, text
    assert "episode_scope_" not in text, text
