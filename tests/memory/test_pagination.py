"""Keyset pagination of a scope's episodes: complete under concurrent writes, both directions, filters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memconsole.memory import episodes, retrieval
from memconsole.memory.models import Episode
from tests.factories import plain_episodes

pytestmark = pytest.mark.django_db

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _walk(keys, limit, **filters):
    """Every page from the first to the last by Next cursors."""
    pages, cursor = [], None
    while True:
        page = episodes.list_episodes(keys, cursor=cursor, limit=limit, **filters)
        pages.append(page)
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def _ids(pages) -> list[str]:
    return [e.episode_id for page in pages for e in page.episodes]


def test_it_lists_newest_first_with_cursors(keys, system):
    made = [episodes.remember(keys, system, f"note {n}").episode.episode_id for n in range(7)]
    first = episodes.list_episodes(keys, limit=3)
    assert [e.episode_id for e in first.episodes] == made[::-1][:3]
    assert first.previous_cursor is None
    assert first.next_cursor == f"a{first.episodes[-1].id}"
    second = episodes.list_episodes(keys, cursor=first.next_cursor, limit=3)
    assert [e.episode_id for e in second.episodes] == made[::-1][3:6]
    assert second.previous_cursor == f"b{second.episodes[0].id}"
    last = episodes.list_episodes(keys, cursor=second.next_cursor, limit=3)
    assert [e.episode_id for e in last.episodes] == made[:1]
    assert last.next_cursor is None and last.previous_cursor is not None


def test_it_returns_every_episode_exactly_once_while_episodes_are_added(keys, system):
    original = [episodes.remember(keys, system, f"before the walk {n}").episode.episode_id for n in range(23)]
    added = []
    seen: list[str] = []
    cursor = None
    while True:
        page = episodes.list_episodes(keys, cursor=cursor, limit=5)
        seen.extend(e.episode_id for e in page.episodes)
        # a bot keeps talking while someone pages through the console
        added.append(episodes.remember(keys, system, f"during the walk {len(added)}").episode.episode_id)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor

    assert len(seen) == len(set(seen)) == 23
    assert seen == original[::-1]
    assert not set(added) & set(seen)

    # and back again with Previous cursors: the old pages, then the new episodes at the top
    back: list[str] = []
    cursor = page.previous_cursor
    while cursor is not None:
        previous = episodes.list_episodes(keys, cursor=cursor, limit=5)
        assert 1 <= len(previous.episodes) <= 5
        back = [e.episode_id for e in previous.episodes] + back
        cursor = previous.previous_cursor
    assert back + [e.episode_id for e in page.episodes] == (original + added)[::-1]
    assert len(set(back)) == len(back)


def test_it_walks_previous_pages_back_to_the_same_pages(keys):
    plain_episodes(keys, 30)
    forward = _walk(keys, 7)
    assert [len(p.episodes) for p in forward] == [7, 7, 7, 7, 2]
    page = forward[-1]
    for expected in reversed(forward[:-1]):
        page = episodes.list_episodes(keys, cursor=page.previous_cursor, limit=7)
        assert [e.episode_id for e in page.episodes] == [e.episode_id for e in expected.episodes]
        assert page.next_cursor == expected.next_cursor
    assert page.previous_cursor is None


@pytest.mark.parametrize("limit", [10, 25, 50, 1, 200])
def test_it_pages_by_each_size(keys, limit):
    rows = plain_episodes(keys, 60)
    pages = _walk(keys, limit)
    assert all(len(p.episodes) == limit for p in pages[:-1])
    assert 1 <= len(pages[-1].episodes) <= limit
    assert _ids(pages) == [e.episode_id for e in reversed(rows)]


def test_it_lists_an_empty_scope(keys):
    assert episodes.list_episodes(keys) == episodes.EpisodePage([], None, None)


def test_it_never_lists_another_scopes_episodes(keys, other_keys):
    plain_episodes(other_keys, 5)
    mine = plain_episodes(keys, 3)
    assert _ids(_walk(keys, 2)) == [e.episode_id for e in reversed(mine)]
    # nor when handed a cursor taken from the other scope
    theirs = episodes.list_episodes(other_keys, limit=2)
    assert {e.user_key for e in episodes.list_episodes(keys, cursor=theirs.next_cursor).episodes} <= {keys.user_key}


def test_it_filters_by_status_sender_tag_importance_and_time(keys, system):
    def at(hours: int) -> datetime:
        return T0 + timedelta(hours=hours)

    a = episodes.remember(keys, system, "a", sender_id="u1", tags=["travel"], importance=1, timestamp=at(1)).episode
    b = episodes.remember(
        keys, system, "b", sender_id="u2", tags=["travel", "food"], importance=3, timestamp=at(2)
    ).episode
    c = episodes.remember(keys, system, "c", sender_id="u1", tags=["food"], importance=5, timestamp=at(3)).episode
    d = episodes.remember(keys, system, "d", sender_id="u2", tags=["traveller"], importance=2, timestamp=at(4)).episode
    episodes.archive(keys, system, [c.episode_id])

    def ids(**filters) -> list[str]:
        return _ids(_walk(keys, 2, **filters))

    assert ids() == [d.episode_id, c.episode_id, b.episode_id, a.episode_id]  # every status by default
    assert ids(statuses=["active"]) == [d.episode_id, b.episode_id, a.episode_id]
    assert ids(statuses=["archived"]) == [c.episode_id]
    assert ids(statuses=["superseded"]) == []
    assert ids(statuses=["active", "archived", "superseded"]) == ids()
    assert ids(sender_id="u1") == [c.episode_id, a.episode_id]
    assert ids(tag="travel") == [b.episode_id, a.episode_id]  # whole tags: not "traveller"
    assert ids(tag="food", statuses=["active"]) == [b.episode_id]
    assert ids(importance_min=3) == [c.episode_id, b.episode_id]
    assert ids(time_after=at(2)) == [d.episode_id, c.episode_id, b.episode_id]
    assert ids(time_before=at(2)) == [b.episode_id, a.episode_id]  # both bounds inclusive
    assert ids(time_after=at(2), time_before=at(4), sender_id="u2") == [d.episode_id, b.episode_id]


def test_it_pages_within_a_filter(keys):
    rows = plain_episodes(keys, 20, sender_id="u1")[::-1]
    Episode.objects.filter(pk__in=[e.pk for e in rows[::2]]).update(status="archived")
    archived = [e.episode_id for e in rows[::2]]
    pages = _walk(keys, 3, statuses=["archived"])
    assert _ids(pages) == archived
    assert [len(p.episodes) for p in pages] == [3, 3, 3, 1]


def test_it_matches_tags_the_same_way_on_every_database(keys, system):
    """SQLite's LIKE ignores ASCII case and PostgreSQL's does not: the filter must not depend on it."""
    travel = episodes.remember(keys, system, "a", tags=["Travel"]).episode
    assert _ids(_walk(keys, 5, tag="travel")) == [travel.episode_id]
    assert _ids(_walk(keys, 5, tag="TRAVEL")) == [travel.episode_id]
    assert [h.episode.episode_id for h in retrieval.recall(keys, "a", tags=["travel"])] == [travel.episode_id]
    assert _ids(_walk(keys, 5, tag="trav")) == []
