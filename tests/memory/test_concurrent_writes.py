"""Writers side by side on PostgreSQL (found by probing the API with concurrent clients): the end
state is one that the same writes one after another would leave, and none of them fails.

SQLite runs every write transaction as `BEGIN IMMEDIATE`, one at a time, so these races need
PostgreSQL's row locks and READ COMMITTED to show.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from django.db import connection

from memconsole.memory import episodes, facts, sessions, window
from memconsole.memory.botmemory_models import Fact
from memconsole.memory.models import Episode
from memconsole.memory.scopes import derive_scope

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite runs one write transaction at a time"),
    pytest.mark.django_db(transaction=True),
]

ALICE = "I live in Lisbon and work as a nurse"
CORRECTION = "Correction: I live in Lisbon and work as a nurse now"  # ≈ 0.864 to ALICE, above 0.85


def side_by_side(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls in threads released together; their results (or the exceptions they raised)."""
    start = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(position: int, call: Callable[[], Any]) -> None:
        try:
            start.wait(30)
            results[position] = call()
        except BaseException as exc:  # the test reads it
            results[position] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n, call)) for n, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def no_errors(results: list[Any]) -> list[Any]:
    errors = [result for result in results if isinstance(result, BaseException)]
    assert not errors, errors
    return results


def test_two_forgets_of_a_whole_session_both_answer(keys, system):
    for n in range(30):
        episodes.remember(keys, system, f"row {n} about tea", sender_id="u1")

    counts = no_errors(side_by_side(*[lambda: sessions.forget_session(keys, system)] * 2))

    assert sorted(counts) == [0, 30] and not Episode.objects.exists()


def test_corrections_at_once_leave_one_memory_active_as_one_after_another_would(keys, system):
    """A bot sending one correction several times at once: each supersedes the others (and the
    original), so one after another only the last stays active, and so it must here."""
    episodes.remember(keys, system, ALICE, sender_id="alice")

    def correct() -> Any:
        return episodes.remember(keys, system, CORRECTION, sender_id="alice", tags=["correction"])

    no_errors(side_by_side(*[correct] * 6))

    active = [episode.content for episode in Episode.objects.filter(status="active")]
    assert len(active) == 1, active
    assert Episode.objects.filter(status="superseded").count() == 6


@pytest.mark.parametrize("subject", ["u2", "u3", "u4"])  # a race: three tries at it
def test_first_writes_of_one_fact_at_once_keep_one_fact_with_its_history(keys, system, subject):
    def write(n: int) -> Callable[[], Any]:
        return lambda: facts.remember_fact(keys, system, subject, "city", f"city {n}")

    no_errors(side_by_side(*[write(n) for n in range(8)]))

    fact = Fact.objects.get()
    assert fact.version == 8 and fact.versions.count() == 7


@pytest.mark.parametrize("attempt", [1, 2, 3])  # a race: three tries at it
def test_messages_at_once_keep_the_newest_in_the_window(keys, system, attempt):
    window.set_window_size(system, keys.bot_uuid, 5)

    def say(n: int) -> Callable[[], Any]:
        return lambda: window.append_message(keys, system, "user", f"m{n}")

    said = no_errors(side_by_side(*[say(n) for n in range(16)]))
    newest = [message.content for message in sorted(said, key=lambda m: m.created_at)][-5:]
    window.append_message(keys, system, "user", "last")  # the next append trims what raced past the size

    kept = [message.content for message in window.recent_messages(keys)]
    assert kept == [*newest[1:], "last"]


def test_deletes_of_corrections_across_two_chats_do_not_deadlock(system):
    """Under bot isolation each chat holds a correction of the other's memory: each delete restores
    into the other chat's audit chain."""
    first, second = derive_scope("bot-a", "group_1", "bot"), derive_scope("bot-a", "group_2", "bot")
    for _ in range(3):
        frank = episodes.remember(second, system, "Frank lives in Oslo", sender_id="frank").episode
        gina = episodes.remember(first, system, "Gina lives in Rome", sender_id="gina").episode
        fixed_frank = episodes.remember(
            first, system, "Frank lives in Bergen, not Oslo", sender_id="frank", tags=["correction"]
        ).episode
        fixed_gina = episodes.remember(
            second, system, "Gina lives in Milan, not Rome", sender_id="gina", tags=["correction"]
        ).episode

        deletes = [(first, fixed_frank.episode_id), (second, fixed_gina.episode_id)]
        no_errors(side_by_side(*[partial(episodes.delete, space, system, [gone]) for space, gone in deletes]))

        assert {e.episode_id for e in Episode.objects.filter(status="active")} >= {frank.episode_id, gina.episode_id}
        Episode.objects.all().delete()


def test_corrections_across_two_chats_do_not_deadlock(system):
    """Under bot isolation each chat corrects the other chat's memory at the same moment: each
    superseded episode's own audit entry goes in the correcting chat's chain, never the other's."""
    first, second = derive_scope("bot-a", "group_1", "bot"), derive_scope("bot-a", "group_2", "bot")
    for _ in range(3):
        frank = episodes.remember(second, system, ALICE, sender_id="frank").episode
        gina = episodes.remember(first, system, ALICE, sender_id="gina").episode

        corrections = [(first, "frank"), (second, "gina")]
        results = no_errors(
            side_by_side(
                *[
                    partial(episodes.remember, space, system, CORRECTION, sender_id=who, tags=["correction"])
                    for space, who in corrections
                ]
            )
        )

        assert sorted(old for result in results for old in result.superseded) == sorted(
            [frank.episode_id, gina.episode_id]
        )
        Episode.objects.all().delete()
