"""The queries that must stay index seeks at any scope size, checked by SQLite's query plan.

SQLite keeps no statistics unless ANALYZE runs, so it plans from the schema alone: the plan seen
here on a small database is the plan it uses on a million episodes (docs/benchmarks.md tells the
story of a `user_key = ? AND episode_id IN (...)` that walked the whole scope).
"""

from __future__ import annotations

import pytest
from django.db import connection

from memconsole.memory.filters import EpisodeFilter
from memconsole.memory.models import Episode

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's planner; PostgreSQL plans from statistics"),
]

IDS = ["0123456789ab", "ba9876543210"]


def plan(queryset) -> str:
    return queryset.explain()


def test_it_looks_episodes_up_by_id_through_the_unique_index(keys):
    text = plan(Episode.objects.in_scope(keys.user_key).filter(status="active").with_ids(IDS))
    assert "memory_episode_episode_id_key" in text or "sqlite_autoindex_memory_episode" in text, text
    assert "SCAN memory_episode" not in text, text


@pytest.mark.parametrize(
    ("query", "index"),
    [
        (
            lambda keys: Episode.objects.filter(user_key=keys.user_key, superseded_by=IDS[0]),
            "episode_scope_superseded_by",
        ),
        (
            lambda keys: Episode.objects.filter(user_key=keys.user_key, imported_episode_id__in=IDS),
            "episode_scope_imported",
        ),
    ],
    ids=["replaced episodes", "imported duplicates"],
)
def test_it_seeks_the_scope_index_for_replaced_and_imported_episodes(keys, query, index):
    text = plan(query(keys))
    assert f"USING INDEX {index} (user_key=? AND" in text, text


@pytest.mark.parametrize("filters", [{"statuses": ["active"]}, {"sender_id": "u1"}, {}])
def test_it_pages_a_scope_by_index_seek(keys, filters):
    where = EpisodeFilter.build(keys, **filters).where()
    text = plan(Episode.objects.filter(where, id__lt=1000).order_by("-id")[:26])
    assert "USING INDEX episode_scope_" in text and "SCAN memory_episode" not in text, text
