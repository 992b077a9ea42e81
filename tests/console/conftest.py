"""Console fixtures: the scopes of the shared fixtures as Scope rows, and htmx request headers."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memconsole.memory.episodes import remember
from memconsole.memory.models import Scope
from memconsole.memory.scopes import register_scope
from tests.factories import plain_episodes

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
