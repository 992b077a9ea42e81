"""Console fixtures: the scopes of the shared fixtures as Scope rows, and htmx request headers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memconsole.memory.counters import recount
from memconsole.memory.episodes import remember
from memconsole.memory.models import Episode, Scope, new_episode_id, tags_text
from memconsole.memory.scopes import register_scope

HTMX = {"HTTP_HX_REQUEST": "true"}


def htmx(target: str | None = None) -> dict[str, str]:
    """Headers of an htmx request (optionally aimed at an element id)."""
    headers = dict(HTMX)
    if target:
        headers["HTTP_HX_TARGET"] = target
    return headers


@pytest.fixture
def scope(scope_with_episodes, keys) -> Scope:
    """bot-a/group_100 (four episodes, one archived) as its Scope row."""
    return Scope.objects.get(scope_key=keys.scope_key, isolation=keys.isolation)


def plain_episodes(keys, n: int, *, tag: str = "bulk", sender_id: str = "u5") -> list[Episode]:
    """n rows written straight to the database, oldest first, without vectors (listing, paging
    and validation never read the index, and embedding costs time), counters recounted."""
    now = timezone.now()
    rows = []
    for i in range(n):
        episode = Episode(
            episode_id=new_episode_id(),
            user_key=keys.user_key,
            scope_key=keys.scope_key,
            timestamp=now - timedelta(minutes=n - i),
            sender_id=sender_id,
            sender_name="Eve",
            tags=[tag],
            tags_text=tags_text([tag]),
        )
        episode.set_content(f"{tag} episode number {i:03d}")
        rows.append(episode)
    Episode.objects.bulk_create(rows)
    recount(keys.user_key)
    return rows


@pytest.fixture
def light_scope(db, keys) -> Scope:
    """bot-a/group_100 registered with three plain episodes and no vectors: for tests that never
    search or change memory (validation, permissions, paging)."""
    scope = register_scope(keys)
    plain_episodes(keys, 3)
    return scope


@pytest.fixture
def other_scope(db, other_keys, system) -> Scope:
    """bot-b/group_200 with one episode: the only scope `granted_client` may see."""
    remember(other_keys, system, "Bot B remembers the blue door", sender_id="u9", sender_name="Zed")
    return Scope.objects.get(scope_key=other_keys.scope_key, isolation=other_keys.isolation)


@pytest.fixture
def url():
    """reverse() for console URL names: url("episodes", scope.pk)."""

    def build(name: str, *args, query: str = "") -> str:
        path = reverse(f"console:{name}", args=args)
        return f"{path}?{query}" if query else path

    return build
