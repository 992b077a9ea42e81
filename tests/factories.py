"""Test data: episodes and profiles, built one way for every test, seed and subprocess script.

`plain_episodes` writes rows straight to the table without vectors (listing, paging, exports and
key rotation never read the index, and embedding costs time); `profile` goes through the domain
(validated, versioned, audited); `stored_profile` writes a profile row and its first version
directly, for seeds of thousands of rows; `snapshots` writes sealed injection snapshots directly.
Tests that exercise `episodes.remember` call it themselves.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from memconsole.memory import counters, profiles
from memconsole.memory.audit import Actor
from memconsole.memory.models import (
    PROFILE_SESSION,
    PROFILE_SPEAKER,
    Episode,
    InjectionSnapshot,
    Profile,
    ProfileVersion,
    ScopeOwner,
)
from memconsole.memory.scopes import ScopeKeys

SYSTEM = Actor.system("tests")


def hex_id(n: int) -> str:
    """Episode id number n (12 hex digits), for rows a test finds again by their number."""
    return f"{n:012x}"


def plain_episodes(
    keys: ScopeOwner,
    count: int,
    *,
    content: str = "bulk episode number {n:03d}",
    start: int = 0,
    sealed: bool = True,
    **fields: Any,
) -> list[Episode]:
    """`count` episodes numbered n = start, start + 1, ... of `keys`' scope, bulk-inserted in that
    order (so ids grow with n) without vectors, through `Episode.create`; counters recounted.

    `content` is formatted with n; any other field (`timestamp`, `importance`, `sender_id`, `tags`,
    `episode_id`, `status`...) is a value or a function of n. By default the rows are tagged "bulk",
    come from speaker u5 "Eve" and are a minute apart, oldest first, the last a minute ago.
    `sealed=False` stores the content in clear, as a row written before encryption keys were set.
    """
    now = timezone.now()
    defaults: dict[str, Any] = {
        "tags": ["bulk"],
        "importance": 2,
        "timestamp": lambda n: now - timedelta(minutes=start + count - n),
        "sender_id": "u5",
        "sender_name": "Eve",
        "source": "agent",
    }
    rows = []
    for n in range(start, start + count):
        row_fields = {name: value(n) if callable(value) else value for name, value in {**defaults, **fields}.items()}
        text = content.format(n=n)
        episode = Episode.create(keys, text, **row_fields)
        if not sealed:
            episode.content_stored, episode.encrypted = text, False
        rows.append(episode)
    Episode.objects.bulk_create(rows, batch_size=500)
    counters.recount(keys.user_key)
    return rows


def snapshots(keys: ScopeKeys, count: int) -> list[InjectionSnapshot]:
    """`count` injection snapshots of `keys`' chat numbered n = 0, 1, ..., written directly (not
    audited): snapshot n has the id n in 32 hex digits (a real id's form), the query "query n" and
    no episodes."""
    rows = []
    for n in range(count):
        snapshot = InjectionSnapshot(
            snapshot_id=f"{n:032x}",
            session_name=keys.session_name,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            isolation=keys.isolation,
        )
        snapshot.set_payload({"query": f"query {n}", "episodes": []})
        snapshot.save()
        rows.append(snapshot)
    return rows


def profile(keys: ScopeKeys, sender_id: str = "", *, actor: Actor = SYSTEM, **data: Any) -> Profile:
    """Set the session profile (no `sender_id`) or `sender_id`'s speaker profile of `keys`' scope to
    `data` (name, traits, preferences, notes; the ones left out are empty), as a console edit does."""
    profile_type = PROFILE_SPEAKER if sender_id else PROFILE_SESSION
    return profiles.replace_profile(keys, actor, profile_type, sender_id, {**profiles.EMPTY_PROFILE, **data})


def stored_profile(scope_key: str, sender_id: str, data: dict[str, Any]) -> Profile:
    """A speaker profile row at version 1 with that version's row, written directly (not audited)."""
    row = Profile(scope_key=scope_key, type=PROFILE_SPEAKER, sender_id=sender_id, version=1)
    row.set_payload(data)
    row.save()
    version = ProfileVersion(profile=row, version=1)
    version.set_payload(data)
    version.save()
    return row
