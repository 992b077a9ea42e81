"""An audit entry's operation by its name, and its before and after as a readable diff: one row per field that changed (added,
removed or changed), list fields with the items that went and came, unchanged fields named once."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext, gettext_lazy

# Shown first: what a person reads to know what the entry is about.
LEADING_FIELDS = ("content", "name", "status")
_ABSENT = object()
# Each operation the log records, by its name in the console; the picker offers them in this order
# (the log may hold others: they show as their code, and typing one filters by it too).
OPERATION_LABELS = {
    "remember": gettext_lazy("Remembered"),
    "supersede": gettext_lazy("Superseded by a correction"),
    "episode_edit": gettext_lazy("Episode edited"),
    "episode_reassign": gettext_lazy("Episode given to another speaker"),
    "archive": gettext_lazy("Archived"),
    "restore": gettext_lazy("Restored"),
    "delete": gettext_lazy("Deleted"),
    "profile_update": gettext_lazy("Profile changed"),
    "profile_rollback": gettext_lazy("Profile rolled back"),
    "fact_remember": gettext_lazy("Fact remembered"),
    "fact_forget": gettext_lazy("Fact forgotten"),
    "window_size": gettext_lazy("Conversation window size changed"),
    "inject": gettext_lazy("Memory put into a prompt"),
    "export": gettext_lazy("Memory exported"),
    "audit_export": gettext_lazy("Audit log exported"),
    "import": gettext_lazy("Memory imported"),
    "erase_subject": gettext_lazy("Person erased"),
    "scope_open": gettext_lazy("Space opened"),
    "scope_remove": gettext_lazy("Space removed"),
    "health_check": gettext_lazy("Health check run"),
    "index_repair": gettext_lazy("Search index repaired"),
    "token_create": gettext_lazy("Bot token created"),
    "token_revoke": gettext_lazy("Bot token revoked"),
    "user_create": gettext_lazy("User created"),
    "user_role": gettext_lazy("User role changed"),
    "user_grants": gettext_lazy("User’s bots changed"),
    "user_active": gettext_lazy("User activated or deactivated"),
    "user_unlock": gettext_lazy("User unlocked"),
    "user_admin_change": gettext_lazy("User changed in the Django admin"),
    "user_delete": gettext_lazy("User deleted"),
    "password_change": gettext_lazy("Password changed"),
    "key_rotation_started": gettext_lazy("Key rotation started"),
    "key_rotation": gettext_lazy("Keys rotated"),
    "row_baseline": gettext_lazy("Rows recorded for tamper checks"),
    "audit_reanchored": gettext_lazy("Audit anchor reset"),
}
# The fields of what audit entries record (an episode, a profile, a fact, an account) by their
# names in the console; a field not named here is shown as its code.
FIELD_LABELS = {
    "content": gettext_lazy("Content"),
    "tags": gettext_lazy("Tags"),
    "importance": gettext_lazy("Importance"),
    "sender_id": gettext_lazy("Speaker ID"),
    "sender_name": gettext_lazy("Speaker name"),
    "timestamp": gettext_lazy("Event time"),
    "status": gettext_lazy("Status"),
    "episode_id": gettext_lazy("Episode ID"),
    "source": gettext_lazy("Source"),
    "superseded_by": gettext_lazy("Superseded by"),
    "imported_episode_id": gettext_lazy("Imported episode ID"),
    "query_id": gettext_lazy("Query ID"),
    "kind": gettext_lazy("Kind"),
    "metadata": gettext_lazy("Metadata"),
    "name": gettext_lazy("Name"),
    "traits": gettext_lazy("Traits"),
    "preferences": gettext_lazy("Preferences"),
    "notes": gettext_lazy("Notes"),
    "version": gettext_lazy("Version"),
    "value": gettext_lazy("Value"),
    "role": gettext_lazy("Role"),
    "bot_uuids": gettext_lazy("Bots"),
    "username": gettext_lazy("Username"),
    "is_active": gettext_lazy("Active"),
    "revoked_at": gettext_lazy("Revoked"),
    "prefix": gettext_lazy("Token prefix"),
}


@dataclass(frozen=True)
class Change:
    field: str
    kind: str  # added | removed | changed
    before: str | None  # the value as text, None when the field was absent
    after: str | None
    removed_items: tuple[str, ...] = ()
    added_items: tuple[str, ...] = ()


@dataclass(frozen=True)
class Diff:
    changes: list[Change] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changes or self.unchanged)


def as_text(value: Any) -> str:
    """A value as a person reads it: text as is, lists one item per line, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "\n".join(value) if value else gettext("none")  # an emptied list, as the console says it
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _field_order(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    names = [name for name in LEADING_FIELDS if name in before or name in after]
    for name in [*before, *after]:
        if name not in names:
            names.append(name)
    return names


def _change(name: str, before: Any, after: Any) -> Change:
    if before is _ABSENT:
        return Change(name, "added", None, as_text(after))
    if after is _ABSENT:
        return Change(name, "removed", as_text(before), None)
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    if isinstance(before, list) and isinstance(after, list):
        removed = tuple(as_text(item) for item in before if item not in after)
        added = tuple(as_text(item) for item in after if item not in before)
    return Change(name, "changed", as_text(before), as_text(after), removed, added)


def audit_diff(before: Any, after: Any) -> Diff:
    """The diff of an entry's `before` and `after` (either may be None: a creation or a deletion)."""
    if before is None and after is None:
        return Diff()
    if not isinstance(before, dict | None) or not isinstance(after, dict | None):
        old = _ABSENT if before is None else before
        new = _ABSENT if after is None else after
        return Diff([_change("", old, new)]) if old != new else Diff([], [""])
    old_fields, new_fields = before or {}, after or {}
    diff = Diff()
    for name in _field_order(old_fields, new_fields):
        old, new = old_fields.get(name, _ABSENT), new_fields.get(name, _ABSENT)
        if old == new:
            diff.unchanged.append(name)
        else:
            diff.changes.append(_change(name, old, new))
    return diff
