"""Profiles (L1): a scope's session profile and its speakers' profiles, every version kept."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from . import audit
from .audit import Actor
from .errors import NotFound, ValidationError, unavailable_on_failure
from .models import PROFILE_SESSION, PROFILE_SPEAKER, Profile, ProfileVersion, Scope
from .scopes import ScopeKeys, register_scope
from .validation import (
    MAX_ITEM_CHARS,
    MAX_NOTES,
    MAX_PREFERENCES,
    MAX_PROFILE_NAME,
    MAX_SENDER_CHARS,
    MAX_TRAITS,
    text,
)

EMPTY_PROFILE = {"name": "", "traits": [], "preferences": [], "notes": ""}


def profile_owner(profile_type: Any, sender_id: Any) -> tuple[str, str]:
    """(type, sender_id) of a profile, validated: a speaker profile needs a sender, a session one has none."""
    if profile_type not in (PROFILE_SESSION, PROFILE_SPEAKER):
        raise ValidationError("type must be 'session' or 'speaker'", field="type")
    sender_id = text(sender_id, "sender_id", MAX_SENDER_CHARS).strip()
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
    return [text(item, name, MAX_ITEM_CHARS, required=True).strip() for item in value]


def _apply_items(current: list[str], add: list[str], remove: list[str], limit: int, name: str) -> list[str]:
    removing = {item.casefold() for item in remove}
    result = [item for item in current if item.casefold() not in removing]
    for item in add:
        if item.casefold() not in {existing.casefold() for existing in result}:
            result.append(item)
    if len(result) > limit:
        raise ValidationError(f"a profile holds at most {limit} {name}", field=name)
    return result


def save_profile(
    keys: ScopeKeys,
    actor: Actor,
    profile_type: str,
    sender_id: str,
    data: dict[str, Any],
    operation: str,
    summary: str,
    updated_at: datetime | None = None,
) -> Profile:
    """Store `data` (already validated) as the profile's next version, audited with before and
    after, inside the caller's transaction. `updated_at` keeps an imported profile's own time."""
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
        metadata={"version": row.version},
    )
    return row


def update_profile(
    keys: ScopeKeys,
    actor: Actor,
    profile_type: Any,
    sender_id: Any = "",
    *,
    name: Any = None,
    notes: Any = None,
    add_traits: Any = None,
    remove_traits: Any = None,
    add_preferences: Any = None,
    remove_preferences: Any = None,
) -> Profile:
    """Change a profile within its limits, keeping every previous version. Audited."""
    actor.require_bot(keys)
    profile_type, sender_id = profile_owner(profile_type, sender_id)
    if name is not None:
        name = text(name, "name", MAX_PROFILE_NAME).strip()
    if notes is not None:
        notes = text(notes, "notes", MAX_NOTES)
    add_traits, remove_traits = _items(add_traits, "traits"), _items(remove_traits, "traits")
    add_preferences, remove_preferences = (
        _items(add_preferences, "preferences"),
        _items(remove_preferences, "preferences"),
    )
    with transaction.atomic():
        scope = register_scope(keys)
        if scope.pk is not None:
            # Queue read-modify-writes of this scope's profiles: on PostgreSQL two concurrent updates
            # would otherwise read the same version and the later would drop the earlier's change
            # (SQLite's IMMEDIATE transactions already serialise them).
            Scope.objects.select_for_update().filter(pk=scope.pk).first()
        current, _ = get_profile(keys, profile_type, sender_id)
        data = {
            "name": current.get("name", "") if name is None else name,
            "traits": _apply_items(current.get("traits", []), add_traits, remove_traits, MAX_TRAITS, "traits"),
            "preferences": _apply_items(
                current.get("preferences", []), add_preferences, remove_preferences, MAX_PREFERENCES, "preferences"
            ),
            "notes": current.get("notes", "") if notes is None else notes,
        }
        return save_profile(
            keys, actor, profile_type, sender_id, data, "profile_update", f"{profile_type} profile updated"
        )


def replace_profile(keys: ScopeKeys, actor: Actor, profile_type: Any, sender_id: Any, data: dict[str, Any]) -> Profile:
    """Set a whole profile (console edit form, imports) after validating every limit."""
    actor.require_bot(keys)
    profile_type, sender_id = profile_owner(profile_type, sender_id)
    clean = validate_profile_data(data)
    with transaction.atomic():
        register_scope(keys)
        return save_profile(
            keys, actor, profile_type, sender_id, clean, "profile_update", f"{profile_type} profile edited"
        )


def validate_profile_data(data: Any) -> dict[str, Any]:
    """A whole profile {name, traits, preferences, notes}, cleaned, or ValidationError."""
    if not isinstance(data, dict):
        raise ValidationError("profile must be an object", field="profile")
    traits = _apply_items([], _items(data.get("traits"), "traits"), [], MAX_TRAITS, "traits")
    preferences = _apply_items([], _items(data.get("preferences"), "preferences"), [], MAX_PREFERENCES, "preferences")
    return {
        "name": text(data.get("name"), "name", MAX_PROFILE_NAME).strip(),
        "traits": traits,
        "preferences": preferences,
        "notes": text(data.get("notes"), "notes", MAX_NOTES),
    }


def rollback_profile(keys: ScopeKeys, actor: Actor, profile_type: Any, sender_id: Any, version: Any) -> Profile:
    """Make an earlier version current again (as a new version). Audited."""
    actor.require_bot(keys)
    profile_type, sender_id = profile_owner(profile_type, sender_id)
    with transaction.atomic():
        row = Profile.objects.filter(scope_key=keys.scope_key, type=profile_type, sender_id=sender_id).first()
        if row is None:
            raise NotFound("no such profile in this scope")
        is_number = isinstance(version, int) and not isinstance(version, bool)
        old = row.versions.filter(version=version).first() if is_number else None
        if old is None:
            raise NotFound("no such profile version")
        with unavailable_on_failure():
            payload = old.payload
        return save_profile(
            keys,
            actor,
            profile_type,
            sender_id,
            payload,
            "profile_rollback",
            f"{profile_type} profile rolled back to v{version}",
        )
