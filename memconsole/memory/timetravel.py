"""What the bot knew at a moment T (issue 18): the profiles as they were at T and the episodes that
were active at T, for one memory space or one speaker, and the difference between two moments.

- **Profiles** come from their versions: every change stores the whole profile after it, so the
  profile at T is its newest version written at or before T.
- **Episodes** are the rows stored at or before T, each with its state at T. Each field of that
  state (status, content, importance, speaker, event time) is the "before" side of the first
  lifecycle entry after T that changed it (archive, restore, edit, reassign, delete: an edit
  records only the fields it changed), or the row as it is now when nothing changed it since. A supersede is read from its
  successor: an episode superseded by one stored after T was still active at T. An episode
  deleted since T is shown from its delete entry's before-image (not when erasure redacted it).
  An imported episode counts from its event time, since an import records its scope, not each row.

Reading the chain after T is bounded (`MAX_CHANGES` entries); past that, the answer says it is
partial rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Q

from .audit import Actor
from .models import (
    PROFILE_SESSION,
    PROFILE_SPEAKER,
    STATUS_ACTIVE,
    STATUS_SUPERSEDED,
    AuditEntry,
    Episode,
    ProfileVersion,
)
from .profiles import EMPTY_PROFILE
from .scopes import ScopeKeys

LIFECYCLE = ("archive", "restore", "delete", "episode_edit", "episode_reassign")
SINCE = {"archive": "archived", "restore": "restored", "episode_edit": "edited", "episode_reassign": "edited"}
STATE_FIELDS = ("status", "content", "importance", "sender_id", "sender_name", "timestamp")
MAX_CHANGES = 5000
MAX_EPISODES = 5000  # the state read at a moment (twice as many rows scanned); the console lists SHOWN
SHOWN = 500
PROFILE_FIELDS = ("name", "traits", "preferences", "notes")


@dataclass(frozen=True)
class KnownEpisode:
    episode_id: str
    content: str
    sender_id: str
    sender_name: str
    importance: int
    timestamp: str | None
    changed_since: str = ""  # "", "edited", "archived", "restored", "superseded" or "deleted"


@dataclass(frozen=True)
class KnownProfile:
    type: str
    sender_id: str
    version: int  # 0: none yet at T
    data: dict[str, Any]


@dataclass
class Knowledge:
    at: datetime
    profiles: list[KnownProfile]
    episodes: list[KnownEpisode]
    partial: bool = False  # more changes since T than were read, or more memories than MAX_EPISODES

    def episode_ids(self) -> set[str]:
        return {episode.episode_id for episode in self.episodes}


@dataclass
class Difference:
    added: list[KnownEpisode] = field(default_factory=list)
    removed: list[KnownEpisode] = field(default_factory=list)
    changed: list[tuple[KnownEpisode, KnownEpisode]] = field(default_factory=list)
    profiles: list[tuple[str, str, str, Any, Any]] = field(default_factory=list)  # type, sender, field, then, now


def known_at(keys: ScopeKeys, actor: Actor, at: datetime, *, speaker_id: str = "") -> Knowledge:
    """What this chat's bot knew at `at` (optionally about one speaker only)."""
    actor.require_bot(keys)
    changes, partial = _changes_since(keys, at)
    episodes, cut = _episodes_at(keys, at, changes, speaker_id)
    return Knowledge(at, _profiles_at(keys, at, speaker_id), episodes, partial or cut)


def difference(before: Knowledge, after: Knowledge) -> Difference:
    """What changed from `before` to `after`: episodes that appeared, went or changed, and profile fields."""
    then = {e.episode_id: e for e in before.episodes}
    now = {e.episode_id: e for e in after.episodes}
    diff = Difference(
        added=[e for i, e in now.items() if i not in then],
        removed=[e for i, e in then.items() if i not in now],
        changed=[(then[i], e) for i, e in now.items() if i in then and then[i].content != e.content],
    )
    earlier = {(p.type, p.sender_id): p for p in before.profiles}
    for profile in after.profiles:
        old = earlier.get((profile.type, profile.sender_id))
        for name in PROFILE_FIELDS:
            was = old.data.get(name, EMPTY_PROFILE[name]) if old else EMPTY_PROFILE[name]
            if profile.data.get(name, EMPTY_PROFILE[name]) != was:
                diff.profiles.append((profile.type, profile.sender_id, name, was, profile.data.get(name)))
    return diff


def _changes_since(keys: ScopeKeys, at: datetime) -> tuple[dict[str, list[AuditEntry]], bool]:
    """Every lifecycle entry after `at` for each episode of the space, oldest first (and whether the read was cut)."""
    rows = AuditEntry.objects.filter(
        user_key=keys.user_key, target_type="episode", operation__in=LIFECYCLE, timestamp__gt=at
    ).order_by("id")
    changes: dict[str, list[AuditEntry]] = {}
    for read, entry in enumerate(rows[: MAX_CHANGES + 1], 1):
        if read > MAX_CHANGES:
            return changes, True
        changes.setdefault(entry.target_id, []).append(entry)
    return changes, False


def _episodes_at(
    keys: ScopeKeys, at: datetime, changes: dict[str, list[AuditEntry]], speaker_id: str
) -> tuple[list[KnownEpisode], bool]:
    """The episodes active at `at`, and whether there were more than were read (MAX_EPISODES)."""
    rows = Episode.objects.in_scope(keys.user_key).filter(created_at__lte=at)
    if speaker_id:  # their episodes now, and those whose speaker changed since (reassigned to or from them)
        moved = [i for i, entries in changes.items() if any("sender_id" in _side(e, "before") for e in entries)]
        rows = rows.filter(Q(sender_id=speaker_id) | Q(episode_id__in=moved))
    rows = rows.order_by("-timestamp", "-id")
    successors = _successor_times(keys, rows)
    known: list[KnownEpisode] = []
    scanned = list(rows[: MAX_EPISODES * 2 + 1])
    for episode in scanned[: MAX_EPISODES * 2]:
        state = _state_at(episode, changes.get(episode.episode_id, []), successors, at)
        if state is not None and (not speaker_id or state.sender_id == speaker_id):
            known.append(state)
    known.extend(_deleted_since(keys, at, changes, speaker_id, {e.episode_id for e in known}))
    return known[:MAX_EPISODES], len(scanned) > MAX_EPISODES * 2 or len(known) > MAX_EPISODES


def _successor_times(keys: ScopeKeys, rows: Any) -> dict[str, datetime]:
    ids = {e.superseded_by for e in rows[: MAX_EPISODES * 2] if e.superseded_by}
    found = Episode.objects.in_scope(keys.user_key).with_ids(list(ids)).values_list("episode_id", "created_at")
    return dict(found)


def _as_at(now: dict[str, Any], entries: list[AuditEntry]) -> dict[str, Any]:
    """The fields of `now` as they were before `entries` (the changes since, oldest first): each
    field from the first entry whose before-image holds it."""
    then = dict(now)
    for name in STATE_FIELDS:
        for entry in entries:
            before = _side(entry, "before")
            if name in before:
                then[name] = before[name]
                break
    return then


def _state_at(
    episode: Episode, entries: list[AuditEntry], successors: dict[str, datetime], at: datetime
) -> KnownEpisode | None:
    now = {
        "status": episode.effective_status,
        "content": episode.content,
        "importance": episode.importance,
        "sender_id": episode.sender_id,
        "sender_name": episode.sender_name,
        "timestamp": episode.timestamp.isoformat() if episode.timestamp else None,
    }
    then = _as_at(now, entries)
    status, since = str(then["status"]), SINCE.get(entries[0].operation, "") if entries else ""
    if status == STATUS_SUPERSEDED:
        successor = successors.get(episode.superseded_by)
        if successor is None or successor <= at:
            return None
        status, since = STATUS_ACTIVE, since or "superseded"
    if status != STATUS_ACTIVE:
        return None
    return _known(episode.episode_id, then, since)


def _known(episode_id: str, state: dict[str, Any], since: str) -> KnownEpisode:
    importance = state.get("importance", 2)
    return KnownEpisode(
        episode_id,
        str(state.get("content", "")),
        str(state.get("sender_id", "")),
        str(state.get("sender_name", "")),
        importance if isinstance(importance, int) else 2,
        state.get("timestamp") if isinstance(state.get("timestamp"), str) else None,
        since,
    )


def _deleted_since(
    keys: ScopeKeys, at: datetime, changes: dict[str, list[AuditEntry]], speaker_id: str, seen: set[str]
) -> list[KnownEpisode]:
    deletes = {
        episode_id: [e.operation for e in entries].index("delete")
        for episode_id, entries in changes.items()
        if episode_id not in seen and any(e.operation == "delete" for e in entries)
    }
    if not deletes:
        return []
    stored = dict(
        AuditEntry.objects.filter(
            user_key=keys.user_key, target_type="episode", operation="remember", target_id__in=list(deletes)
        ).values_list("target_id", "timestamp")
    )
    known = []
    for episode_id, position in deletes.items():
        entries = changes[episode_id]
        if any(entry.redacted for entry in entries[: position + 1]):
            continue  # erased: nothing of it is kept, and nothing is shown
        image = _as_at(_side(entries[position], "before"), entries[:position])
        if image.get("status", STATUS_ACTIVE) != STATUS_ACTIVE or (speaker_id and image.get("sender_id") != speaker_id):
            continue
        when = stored.get(episode_id)
        if when is None:  # imported: no entry of its own, its event time stands for its arrival
            stamp = image.get("timestamp")
            when = datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
        if when is None or when > at:
            continue
        known.append(_known(episode_id, image, "deleted"))
    return known


def _side(entry: AuditEntry, side: str) -> dict[str, Any]:
    value = entry.payload.get(side)
    return value if isinstance(value, dict) else {}


def _profiles_at(keys: ScopeKeys, at: datetime, speaker_id: str) -> list[KnownProfile]:
    versions = ProfileVersion.objects.filter(profile__scope_key=keys.scope_key, created_at__lte=at).select_related(
        "profile"
    )
    if speaker_id:
        versions = versions.filter(profile__type=PROFILE_SPEAKER, profile__sender_id=speaker_id)
    newest: dict[tuple[str, str], ProfileVersion] = {}
    for version in versions.order_by("profile_id", "-version"):
        newest.setdefault((version.profile.type, version.profile.sender_id), version)
    profiles = [KnownProfile(t, s, v.version, v.payload) for (t, s), v in newest.items()]
    if not speaker_id and (PROFILE_SESSION, "") not in newest:
        profiles.insert(0, KnownProfile(PROFILE_SESSION, "", 0, dict(EMPTY_PROFILE)))
    return sorted(profiles, key=lambda p: (p.type != PROFILE_SESSION, p.sender_id))
