"""The Episodes list's orders and counts as they must behave at a million rows (issue 22): a
speaker's count read from its index alone, a speaker's page in every order through the speaker's
indexes, an estimate that reads the newest COUNT_LIMIT rows in id order, and deep pages in the right
order. SQLite plans from the schema alone (no statistics), so a plan seen here is the plan it uses
on a million episodes (docs/benchmarks.md, bench/episode_list.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memconsole.memory import counters, queries
from tests.factories import plain_episodes

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(microsecond=0)

sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's planner; PostgreSQL uses statistics")


def statuses(n: int) -> str:
    return ["active", "active", "archived", "active", "superseded"][n % 5]


@pytest.fixture
def mixed(keys):
    """40 episodes: three speakers, every status, importance cycling 1..5, times out of id order."""
    return plain_episodes(
        keys,
        40,
        sender_id=lambda n: f"s{n % 3}",
        status=statuses,
        importance=lambda n: n % 5 + 1,
        timestamp=lambda n: None if n % 7 == 0 else NOW - timedelta(hours=(n * 13) % 40),
    )


def plans_of(captured, marker: str) -> list[str]:
    found = []
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            if marker in query["sql"]:
                cursor.execute("EXPLAIN QUERY PLAN " + query["sql"])
                found.append(" ".join(str(row[-1]) for row in cursor.fetchall()))
    return found


def every_page(keys, sort: str, **filters) -> list[str]:
    """The episode ids of every page, following each page's next cursor (3 rows a page)."""
    seen, cursor = [], None
    while True:
        page, _ = queries.episode_page(keys, sort=sort, cursor=cursor, limit=3, **filters)
        seen += [row.episode_id for row in page.items]
        if not page.next_cursor:
            return seen
        cursor = page.next_cursor


def expected(rows, sort: str, sender: str, wanted: set[str]) -> list[str]:
    kept = [row for row in rows if row.sender_id == sender and row.status in wanted]
    ids = {row.episode_id: index for index, row in enumerate(rows)}  # ids grow with n

    def key(row):
        if sort == "importance":
            return (1, row.importance, ids[row.episode_id])
        if sort == "stored":
            return (1, 0, ids[row.episode_id])
        return (row.timestamp is not None, row.timestamp.timestamp() if row.timestamp else 0, ids[row.episode_id])

    return [row.episode_id for row in sorted(kept, key=key, reverse=True)]


@pytest.mark.parametrize("sort", ["time", "importance", "stored"])
def test_a_speakers_pages_in_every_order_hold_exactly_that_speakers_rows_in_order(keys, mixed, sort):
    got = every_page(keys, sort, sender_id="s1", statuses=["active", "archived"])
    assert got == expected(mixed, sort, "s1", {"active", "archived"})


@sqlite_only
@pytest.mark.parametrize(
    ("sort", "index"),
    [
        ("time", "episode_scope_sender_time"),
        ("importance", "episode_scope_sender_imp"),
        ("stored", "episode_scope_sender_id"),
    ],
)
def test_a_speakers_page_and_count_seek_the_speakers_indexes(keys, mixed, sort, index):
    with CaptureQueriesContext(connection) as captured:
        _page, count = queries.episode_page(keys, sort=sort, sender_id="s2", statuses=["active"])
    assert count.matching == sum(1 for row in mixed if row.sender_id == "s2" and row.status == "active")
    counted = plans_of(captured, "COUNT(")
    assert len(counted) == 1 and "COVERING INDEX episode_scope_sender_status" in counted[0], counted
    listed = plans_of(captured, 'ORDER BY "memory_episode"')
    assert listed and all(f"INDEX {index} (user_key=? AND sender_id=?" in plan for plan in listed), listed


def test_an_estimate_extrapolates_from_the_newest_rows_in_the_chosen_statuses(keys, mixed, monkeypatch):
    monkeypatch.setattr(queries, "COUNT_LIMIT", 10)
    active = [row for row in mixed if row.status == "active"]  # 24 of them
    newest = active[-10:]
    count = queries.episode_count(keys, statuses=["active"], importance_min=4)
    sampled = sum(1 for row in newest if row.importance >= 4)
    assert count.estimated and count.filtered and not count.capped
    assert (count.matching, count.total) == (round(sampled * len(active) / 10), len(active))
    tag = queries.episode_count(keys, statuses=["active"], tag="bulk")
    assert tag.estimated and tag.matching == len(active)  # every row carries it: the estimate is exact


@sqlite_only
def test_an_estimate_reads_the_newest_rows_by_the_status_index_only(keys, mixed, monkeypatch):
    monkeypatch.setattr(queries, "COUNT_LIMIT", 10)
    with CaptureQueriesContext(connection) as captured:
        queries.episode_count(keys, statuses=["active"], tag="bulk")
    counted = plans_of(captured, "COUNT(")
    assert len(counted) == 1, counted
    assert "episode_scope_status_id (user_key=? AND status=? AND id>?)" in counted[0], counted
    assert "SUBQUERY" not in counted[0] and "importance" not in counted[0], counted


@sqlite_only
@pytest.mark.parametrize("statuses", [["active"], ["active", "archived"], None])
def test_an_importance_estimate_reads_only_the_matching_index_entries(keys, mixed, monkeypatch, statuses):
    """A minimum importance is counted as its levels: one seek per (status, level) of an importance
    index, no table row read (reading the newest 10,000 rows took 8-10 ms at a million)."""
    monkeypatch.setattr(queries, "COUNT_LIMIT", 10)
    with CaptureQueriesContext(connection) as captured:
        count = queries.episode_count(keys, statuses=statuses, importance_min=4)
    assert count.estimated
    counted = plans_of(captured, "COUNT(")
    assert len(counted) == 1, counted
    assert "COVERING INDEX episode_scope_" in counted[0] and "importance=? AND id>?" in counted[0], counted


def test_stale_counters_above_the_limit_still_give_a_count(keys, mixed, monkeypatch):
    """Counters that say more rows than there are (a crash between a write and its count) never
    make the page fail: the sample is then every row there is."""
    monkeypatch.setattr(queries, "COUNT_LIMIT", 30)
    counters.count(keys.user_key, active=100)
    count = queries.episode_count(keys, statuses=["active"], importance_min=4)
    assert count.estimated and count.total == 124 and count.matching >= 0
