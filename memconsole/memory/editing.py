"""Correcting memory by hand: edit an episode, reassign its speaker, add one (source `console`).

The console calls these; the API may expose the same functions. Each edit is one audited change
with before and after (only the fields that changed), guarded by `if_version` like profiles: an
editor that read an older version gets `Conflict` and nothing is written. Content goes through
`Episode.set_content()` and a changed content is re-embedded; any other change updates the vector's
metadata (docs/design.md §5: the database commits first, the index follows).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from memconsole.lib import embeddings

from . import audit
from .audit import Actor
from .episodes import RememberResult, remember
from .errors import Conflict, NotFound, ValidationError, VectorIndexUnavailable, unavailable_on_failure
from .models import AuditEntry, Episode, tags_text
from .scopes import ScopeKeys
from .sync import index_episodes, sync_vector_metadata
from .validation import (
    clamp_importance,
    is_episode_id,
    max_content_chars,
    text,
    validate_event_time,
    validate_kind,
    validate_speaker,
    validate_tags,
)
from .wording import said

log = logging.getLogger("memconsole.memory")

# The fields an edit may change, in the order the audit entry lists them.
EDITABLE = ("content", "tags", "importance", "kind", "sender_id", "sender_name", "timestamp")
EDIT_OPERATIONS = ("episode_edit", "episode_reassign")
# The summaries of their audit entries, and the words for the fields they name (`wording`).
EDITED = {
    "episode_edit": gettext_noop("edited: %(fields)s"),
    "episode_reassign": gettext_noop("speaker reassigned: %(fields)s"),
}
FIELD_WORDS = {
    "content": gettext_noop("content"),
    "tags": gettext_noop("tags"),
    "importance": gettext_noop("importance"),
    "kind": gettext_noop("kind"),
    "sender_id": gettext_noop("sender_id"),
    "sender_name": gettext_noop("sender_name"),
    "timestamp": gettext_noop("timestamp"),
}
UNCHANGED: Any = object()


@dataclass
class EpisodeEdit:
    """A stored edit: the episode as it is now, the fields that changed, whether its vector was rewritten."""

    episode: Episode
    changed: list[str]
    reindexed: bool = False


def _if_version(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError("if_version must be a whole number, 0 or more", field="if_version")
    return value


def _image(episode: Episode, fields: list[str]) -> dict[str, Any]:
    values = {
        "content": episode.content,
        "tags": list(episode.tags),
        "importance": episode.importance,
        "kind": episode.kind,
        "sender_id": episode.sender_id,
        "sender_name": episode.sender_name,
        "timestamp": episode.timestamp.isoformat() if episode.timestamp else None,
    }
    return {name: values[name] for name in fields}


def _clean(changes: dict[str, Any]) -> dict[str, Any]:
    """The given fields, validated (`UNCHANGED` ones left out)."""
    clean: dict[str, Any] = {}
    for name, value in changes.items():
        if value is UNCHANGED:
            continue
        if name == "content":
            clean[name] = text(value, "content", max_content_chars(), required=True, trim=True)
        elif name == "tags":
            clean[name] = validate_tags(value)
        elif name == "importance":
            clean[name] = clamp_importance(value)[0]
        elif name == "kind":
            clean[name] = validate_kind(value)
        elif name in ("sender_id", "sender_name"):
            clean[name] = validate_speaker(value, name)  # trimmed and refused as `remember` does
        elif name == "timestamp":
            stamp = validate_event_time(value)
            if stamp is None:
                raise ValidationError("timestamp is required", field="timestamp")
            clean[name] = stamp
    return clean


def _differs(episode: Episode, name: str, value: Any) -> bool:
    current = episode.content if name == "content" else getattr(episode, name)
    if name == "tags":
        return list(current) != list(value)
    return bool(current != value)


def edit_episode(
    keys: ScopeKeys,
    actor: Actor,
    episode_id: Any,
    *,
    content: Any = UNCHANGED,
    tags: Any = UNCHANGED,
    importance: Any = UNCHANGED,
    kind: Any = UNCHANGED,
    sender_id: Any = UNCHANGED,
    sender_name: Any = UNCHANGED,
    timestamp: Any = UNCHANGED,
    if_version: Any = None,
    operation: str = "episode_edit",
    note: dict[str, Any] | None = None,
) -> EpisodeEdit:
    """Change an episode's content, tags, importance, kind, speaker or event time, in one audited change.

    Only the fields given are considered and only those that differ are written; nothing differing
    writes nothing (no audit entry, no new version). With `if_version` (the version the editor read)
    an episode edited since raises `Conflict`. `note` adds to the audit entry's metadata (a fix made
    from an injection snapshot records its reason there). A changed content is re-embedded after the commit;
    with the index down the row stays marked not current for `reindex`. `NotFound` outside the scope.
    """
    actor.require_bot(keys)
    if not is_episode_id(episode_id):
        raise NotFound("no such episode in this scope")
    if_version = _if_version(if_version)
    given = {
        "content": content,
        "tags": tags,
        "importance": importance,
        "kind": kind,
        "sender_id": sender_id,
        "sender_name": sender_name,
        "timestamp": timestamp,
    }
    clean = _clean(given)
    vector = None
    if "content" in clean:
        with unavailable_on_failure():  # embed before the transaction: a failing model writes nothing
            vector = embeddings.embed([clean["content"]])
    with transaction.atomic():
        episode = Episode.objects.in_scope(keys.user_key).filter(episode_id=episode_id).select_for_update().first()
        if episode is None:
            raise NotFound("no such episode in this scope")
        if if_version is not None and if_version != episode.version:
            raise Conflict(
                episode.version,
                f"the episode changed since version {if_version} was read (now version {episode.version})",
            )
        changed = [name for name in EDITABLE if name in clean and _differs(episode, name, clean[name])]
        if not changed:
            return EpisodeEdit(episode, [])
        before = _image(episode, changed)
        _apply(episode, clean, changed)
        episode.version += 1
        episode.updated_at = timezone.now()
        episode.vector_current = False
        episode.save()
        audit.append(
            operation,
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            sender_id=episode.sender_id,
            sender_name=episode.sender_name,
            target_type="episode",
            target_id=episode.episode_id,
            summary=said(EDITED[operation], fields=[said(FIELD_WORDS.get(name, name)) for name in changed]),
            before=before,
            after=_image(episode, changed),
            metadata={"version": episode.version, "changed": changed, **(note or {})},
        )
    return EpisodeEdit(episode, changed, _sync_index(episode, vector))


def _apply(episode: Episode, clean: dict[str, Any], changed: list[str]) -> None:
    for name in changed:
        if name == "content":
            episode.set_content(clean["content"])
        elif name == "tags":
            episode.tags = clean["tags"]
            episode.tags_text = tags_text(clean["tags"])
        else:
            setattr(episode, name, clean[name])


def _sync_index(episode: Episode, vector: Any) -> bool:
    """Rewrite the vector (new content) or its metadata; False when it is left for `reindex`."""
    if vector is None:
        sync_vector_metadata([episode])
        return False
    try:
        index_episodes([episode], vector)
    except VectorIndexUnavailable:
        log.exception("episode %s edited but not re-indexed; `manage.py reindex` will index it", episode.episode_id)
        return False
    return True


def changes_since(keys: ScopeKeys, episode_id: str, version: int, limit: int = 20) -> list[dict[str, Any]]:
    """What the edits after `version` changed, field by field, oldest first: [{field, before, after,
    version}] read from their audit entries (what a conflicting editor is shown)."""
    rows = AuditEntry.objects.filter(
        user_key=keys.user_key,
        target_type="episode",
        target_id=episode_id,
        operation__in=EDIT_OPERATIONS,
    ).order_by("-id")[:limit]
    changes: list[dict[str, Any]] = []
    for entry in reversed(list(rows)):
        with unavailable_on_failure():
            payload = entry.payload
        entry_version = (payload.get("metadata") or {}).get("version", 0)
        if not isinstance(entry_version, int) or entry_version <= version:
            continue
        before, after = payload.get("before") or {}, payload.get("after") or {}
        changes.extend(
            {"field": name, "before": before.get(name), "after": after.get(name), "version": entry_version}
            for name in EDITABLE
            if name in after or name in before
        )
    return changes


def reassign_speaker(
    keys: ScopeKeys, actor: Actor, episode_id: Any, sender_id: Any, sender_name: Any = "", if_version: Any = None
) -> EpisodeEdit:
    """ "This is about Bob, not Alice": set the episode's speaker (id and name) in one audited action."""
    if not isinstance(sender_id, str) or not validate_speaker(sender_id):  # "\u200b" names no one
        raise ValidationError("choose the speaker this memory is about", field="sender_id")
    return edit_episode(
        keys,
        actor,
        episode_id,
        sender_id=sender_id,
        sender_name=sender_name,
        if_version=if_version,
        operation="episode_reassign",
    )


def add_episode(
    keys: ScopeKeys,
    actor: Actor,
    content: Any,
    *,
    tags: Any = None,
    importance: Any = 2,
    kind: Any = "",
    sender_id: Any = "",
    sender_name: Any = "",
    timestamp: datetime | None = None,
) -> RememberResult:
    """An episode written by hand in the console: `remember` with source `console` (so a correction
    tag supersedes as it does for a bot), registering the space when it is the first memory in it."""
    return remember(
        keys,
        actor,
        content,
        tags=tags,
        importance=importance,
        kind=kind,
        sender_id=validate_speaker(sender_id),
        sender_name=sender_name,  # trimmed and checked by remember, as a bot's
        timestamp=timestamp,
        source="console",
    )
