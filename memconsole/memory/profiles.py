"""Profiles (L1): a scope's session profile and its speakers' profiles, every version kept."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from . import audit
from .audit import Actor
from .errors import Conflict, NotFound, ValidationError, unavailable_on_failure
from .models import PROFILE_SESSION, PROFILE_SPEAKER, Profile, ProfileVersion, Scope
from .scopes import ScopeKeys, register_scope
from .validation import (
    MAX_ITEM_CHARS,
    MAX_NOTES,
    MAX_PREFERENCES,
    MAX_PROFILE_NAME,
    MAX_TRAITS,
    MAX_VERSION,
    clipped_text,
    single_line,
    text,
    validate_speaker,
)
from .wording import Said, said

EMPTY_PROFILE = {"name": "", "traits": [], "preferences": [], "notes": ""}


def profile_owner(profile_type: Any, sender_id: Any) -> tuple[str, str]:
    """(type, sender_id) of a profile, validated: a speaker profile needs a sender, a session one has none."""
    if profile_type not in (PROFILE_SESSION, PROFILE_SPEAKER):
        raise ValidationError("type must be 'session' or 'speaker'", field="type")
    sender_id = validate_speaker(sender_id)
    if profile_type == PROFILE_SPEAKER and not sender_id:
        raise ValidationError("a speaker profile needs sender_id", field="sender_id")
    if profile_type == PROFILE_SESSION:
        sender_id = ""
    return profile_type, sender_id


def get_profile(keys: ScopeKeys, profile_type: Any, sender_id: Any = "") -> tuple[dict[str, Any], Profile | None]:
    """(profile data, row or None). Missing profiles read as empty; `Unavailable` when no key opens it."""
    profile_type, sender_id = profile_owner(profile_type, sender_id)
    row = Profile.objects.filter(scope_key=keys.scope_key, type=profile_type, sender_id=sender_id).first()
    if row is None:
        return dict(EMPTY_PROFILE, traits=[], preferences=[]), None
    with unavailable_on_failure():
        return row.payload, row


def _items(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValidationError(f"{name} must be a list of strings", field=name)
    return [single_line(text(item, name, MAX_ITEM_CHARS, required=True, trim=True), name) for item in value]


def apply_items(current: list[str], add: list[str], remove: list[str], limit: int) -> tuple[list[str], list[str]]:
    """(items, evicted): `current` without `remove`, then `add` appended (each item once, compared
    case-insensitively), and the oldest items evicted (from the front) while more than `limit` remain.

    A long-running bot keeps adding to a full profile: it keeps working, the oldest item making room.
    """
    removing = {item.casefold() for item in remove}
    result = [item for item in current if item.casefold() not in removing]
    for item in add:
        if item.casefold() not in {existing.casefold() for existing in result}:
            result.append(item)
    overflow = max(0, len(result) - limit)
    return result[overflow:], result[:overflow]


def _within_limit(items: list[str], limit: int, name: str) -> list[str]:
    """A whole list as given (console edit, replace): more than the limit is refused, not evicted."""
    kept, _ = apply_items([], items, [], len(items))
    if len(kept) > limit:
        raise ValidationError(f"a profile holds at most {limit} {name}", field=name)
    return kept


def _lock_scope(keys: ScopeKeys) -> None:
    """Register the scope and queue read-modify-writes of its profiles (inside the caller's transaction):
    on PostgreSQL two concurrent updates would otherwise read the same version and the later would drop
    the earlier's change, or both pass the same `if_version` (SQLite's IMMEDIATE transactions already
    serialise them)."""
    scope = register_scope(keys)
    if scope.pk is not None:
        Scope.objects.select_for_update().filter(pk=scope.pk).first()


def _check_version(row: Profile | None, if_version: int | None) -> None:
    current = row.version if row else 0
    if if_version is not None and if_version != current:
        raise Conflict(current, f"the profile changed since version {if_version} was read (now version {current})")


def _if_version(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_VERSION:
        raise ValidationError(f"if_version must be a whole number from 0 to {MAX_VERSION}", field="if_version")
    return value


@dataclass
class ProfileChange:
    """A stored profile change and what the limits did to it: `evicted` = {"traits": [...],
    "preferences": [...]} (the oldest items dropped to make room), `adjusted` = inputs stored changed
    (["notes"] when notes were cut at the limit)."""

    profile: Profile | None  # None: there is no profile yet, and the change made none (an empty update)
    evicted: dict[str, list[str]] = field(default_factory=dict)
    adjusted: list[str] = field(default_factory=list)


def profile_answer(profile_type: str, sender_id: str, data: dict[str, Any], row: Profile | None) -> dict[str, Any]:
    """A profile as the bot-facing faces answer it (the JSON API's `Profile`, the MCP tools')."""
    return {
        "type": profile_type,
        "sender_id": "" if profile_type == PROFILE_SESSION else validate_speaker(sender_id),  # as stored
        "name": data.get("name", ""),
        "traits": data.get("traits", []),
        "preferences": data.get("preferences", []),
        "notes": data.get("notes", ""),
        "version": row.version if row else 0,
        "updated_at": row.updated_at.isoformat() if row else None,
    }


def profile_change_answer(profile_type: str, sender_id: str, change: ProfileChange) -> dict[str, Any]:
    """The answer to a profile update: the profile after it, what a full profile evicted, what was cut."""
    row = change.profile
    return {
        **profile_answer(profile_type, sender_id, row.payload if row else EMPTY_PROFILE, row),
        "evicted": {"traits": change.evicted.get("traits", []), "preferences": change.evicted.get("preferences", [])},
        "adjusted": change.adjusted,
    }


# The summaries of a profile's audit entries, by profile type and change.
SAID = {
    PROFILE_SESSION: {
        "update": gettext_noop("session profile updated"),
        "edit": gettext_noop("session profile edited"),
        "rollback": gettext_noop("session profile rolled back to v%(version)s"),
        "import": gettext_noop("session profile imported (%(format)s)"),
    },
    PROFILE_SPEAKER: {
        "update": gettext_noop("speaker profile updated"),
        "edit": gettext_noop("speaker profile edited"),
        "rollback": gettext_noop("speaker profile rolled back to v%(version)s"),
        "import": gettext_noop("speaker profile imported (%(format)s)"),
    },
}


def save_profile(
    keys: ScopeKeys,
    actor: Actor,
    profile_type: str,
    sender_id: str,
    data: dict[str, Any],
    operation: str,
    summary: Said,
    updated_at: datetime | None = None,
    metadata: dict[str, Any] | None = None,
) -> Profile:
    """Store `data` (already validated) as the profile's next version, audited with before and
    after, inside the caller's transaction. `updated_at` keeps an imported profile's own time;
    `metadata` is added to the audit entry's (which always holds the new version)."""
    now = timezone.now()
    row = (
        Profile.objects.select_for_update()
        .filter(scope_key=keys.scope_key, type=profile_type, sender_id=sender_id)
        .first()
    )
    with unavailable_on_failure():
        before = row.payload if row else None
    if row is None:
        row = Profile(scope_key=keys.scope_key, type=profile_type, sender_id=sender_id, version=0)
    row.version += 1
    row.updated_at = updated_at or now
    row.set_payload(data)
    row.save()
    version = ProfileVersion(profile=row, version=row.version, created_at=now, actor=actor.label[:255])
    version.set_payload(data)
    version.save(force_insert=True)
    audit.append(
        operation,
        actor,
        scope_key=keys.scope_key,
        user_key=keys.user_key,
        sender_id=sender_id,
        sender_name=data.get("name", "") if profile_type == PROFILE_SPEAKER else "",
        target_type=f"{profile_type}_profile",
        target_id=f"{profile_type}:{sender_id}" if sender_id else profile_type,
        summary=summary,
        before=before,
        after=data,
        metadata={"version": row.version, **(metadata or {})},
    )
    return row


def update_profile(
    keys: ScopeKeys, actor: Actor, profile_type: Any, sender_id: Any = "", **changes: Any
) -> Profile | None:
    """`change_profile`, answering the stored profile only (for callers that need no report)."""
    return change_profile(keys, actor, profile_type, sender_id, **changes).profile


def change_profile(
    keys: ScopeKeys,
    actor: Actor,
    profile_type: Any,
    sender_id: Any = "",
    *,
    name: Any = None,
    notes: Any = None,
    append_notes: Any = None,
    add_traits: Any = None,
    remove_traits: Any = None,
    add_preferences: Any = None,
    remove_preferences: Any = None,
    if_version: Any = None,
) -> ProfileChange:
    """Change a profile, keeping every previous version. Audited, with what the limits did.

    A profile that already holds 20 traits (10 preferences) evicts its oldest to take a new one;
    notes (set, then `append_notes` added on a new line) are cut at 2,000 characters. With
    `if_version` (the version the writer read) a profile changed since raises `Conflict` and
    nothing is written. A change that leaves the stored profile as it is (a trait it already has)
    writes nothing: the version stays, so a guarded writer's next `if_version` still holds.
    """
    actor.require_bot(keys)
    profile_type, sender_id = profile_owner(profile_type, sender_id)
    if name is not None:
        name = single_line(text(name, "name", MAX_PROFILE_NAME, trim=True), "name")
    if notes is not None:
        notes = text(notes, "notes", sys.maxsize)
    if append_notes is not None:
        append_notes = text(append_notes, "append_notes", sys.maxsize, trim=True)
    if_version = _if_version(if_version)
    add_traits, remove_traits = _items(add_traits, "traits"), _items(remove_traits, "traits")
    add_preferences, remove_preferences = (
        _items(add_preferences, "preferences"),
        _items(remove_preferences, "preferences"),
    )
    with transaction.atomic():
        _lock_scope(keys)
        current, row = get_profile(keys, profile_type, sender_id)
        _check_version(row, if_version)
        traits, evicted_traits = apply_items(current.get("traits", []), add_traits, remove_traits, MAX_TRAITS)
        preferences, evicted_preferences = apply_items(
            current.get("preferences", []), add_preferences, remove_preferences, MAX_PREFERENCES
        )
        new_notes = current.get("notes", "") if notes is None else notes
        if append_notes:
            new_notes = f"{new_notes}\n{append_notes}" if new_notes else append_notes
        new_notes, notes_cut = clipped_text(new_notes, "notes", MAX_NOTES)
        data = {
            "name": current.get("name", "") if name is None else name,
            "traits": traits,
            "preferences": preferences,
            "notes": new_notes,
        }
        evicted = {
            kind: items for kind, items in (("traits", evicted_traits), ("preferences", evicted_preferences)) if items
        }
        adjusted = ["notes"] if notes_cut else []
        if unchanged(current, data):  # also for a profile not written yet: an empty update makes none
            # It changes nothing: no new version, no audit entry (as for facts); a cut still says so.
            return ProfileChange(row, adjusted=adjusted)
        report = {**({"evicted": evicted} if evicted else {}), **({"adjusted": adjusted} if adjusted else {})}
        row = save_profile(
            keys,
            actor,
            profile_type,
            sender_id,
            data,
            "profile_update",
            said(SAID[profile_type]["update"]),
            metadata=report,
        )
    return ProfileChange(row, evicted, adjusted)


def replace_profile(
    keys: ScopeKeys, actor: Actor, profile_type: Any, sender_id: Any, data: dict[str, Any], if_version: Any = None
) -> Profile:
    """Set a whole profile (the console's edit form) after validating every limit. With
    `if_version` (the version the editor rendered) a profile changed since raises `Conflict`; saved
    as it was, nothing is written and the stored row is returned (its version unchanged)."""
    actor.require_bot(keys)
    profile_type, sender_id = profile_owner(profile_type, sender_id)
    clean = validate_profile_data(data)
    if_version = _if_version(if_version)
    with transaction.atomic():
        _lock_scope(keys)
        current, row = get_profile(keys, profile_type, sender_id)
        if if_version is not None:
            _check_version(row, if_version)
        if row is not None and unchanged(current, clean):
            return row  # saved as it was: the version stays, nothing is audited
        return save_profile(
            keys, actor, profile_type, sender_id, clean, "profile_update", said(SAID[profile_type]["edit"])
        )


def unchanged(current: dict[str, Any], data: dict[str, Any]) -> bool:
    """Whether storing `data` would leave the stored profile `current` as it is."""
    return data == {key: current.get(key, empty) for key, empty in EMPTY_PROFILE.items()}


def validate_profile_data(data: Any) -> dict[str, Any]:
    """A whole profile {name, traits, preferences, notes}, cleaned, or ValidationError (a whole
    profile given beyond a limit is refused: the person giving it sees what to shorten)."""
    if not isinstance(data, dict):
        raise ValidationError("profile must be an object", field="profile")
    traits = _within_limit(_items(data.get("traits"), "traits"), MAX_TRAITS, "traits")
    preferences = _within_limit(_items(data.get("preferences"), "preferences"), MAX_PREFERENCES, "preferences")
    return {
        "name": single_line(text(data.get("name"), "name", MAX_PROFILE_NAME, trim=True), "name"),
        "traits": traits,
        "preferences": preferences,
        "notes": text(data.get("notes"), "notes", MAX_NOTES),
    }


def rollback_profile(
    keys: ScopeKeys, actor: Actor, profile_type: Any, sender_id: Any, version: Any, if_version: Any = None
) -> Profile:
    """Make an earlier version current again (as a new version). Audited. Rolling back to what is
    current already (its own version, or an older one with the same content) changes nothing and
    returns the profile as it is. With `if_version` (the current version the caller saw), a profile
    saved since raises `Conflict`: a rollback must not silently undo a change its author never saw."""
    actor.require_bot(keys)
    profile_type, sender_id = profile_owner(profile_type, sender_id)
    with transaction.atomic():
        row = Profile.objects.filter(scope_key=keys.scope_key, type=profile_type, sender_id=sender_id).first()
        if row is None:
            raise NotFound("no such profile in this scope")
        if if_version is not None and if_version != row.version:
            raise Conflict(row.version, f"the profile changed since version {if_version} was read (now {row.version})")
        is_number = isinstance(version, int) and not isinstance(version, bool)
        old = row.versions.filter(version=version).first() if is_number else None
        if old is None:
            raise NotFound("no such profile version")
        with unavailable_on_failure():
            payload = old.payload
            if old.version == row.version or payload == row.payload:
                return row
        return save_profile(
            keys,
            actor,
            profile_type,
            sender_id,
            payload,
            "profile_rollback",
            said(SAID[profile_type]["rollback"], version=version),
        )
