"""What an import answers: the report (per scope and in total), or `ImportFileError`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, NotRequired, TypedDict

from django.utils.translation import gettext_noop

from ..errors import ValidationError
from ..reports import OMIT, Report
from ..scopes import ScopeKeys
from ..wording import Said

MAX_CONFLICTS_LISTED = 100  # and as many skipped items and warnings


class ImportFileError(ValidationError):
    """The file is malformed, truncated, too large or of another format. Nothing was written."""


class ScopeTally(TypedDict):
    """One target scope's part of an import (`ImportReport.scopes`, and its audit entry)."""

    scope_key: str
    user_key: str
    bot_uuid: str
    session_name: str
    isolation: str
    episodes: int
    profiles: int
    statuses: dict[str, int]
    conflicts: int


class Conflict(TypedDict):
    """A record that was skipped (or, for a profile, written as a new version).

    Also the shape of `ImportReport.skipped` (kind "deleted": deleted in the source, not imported)."""

    scope_key: str
    kind: str
    where: str
    id: str
    reason: str


class ItemWarning(TypedDict):
    """A record imported with a detail adjusted (kind: importance_clamped, unknown_status,
    timestamp_missing, timestamp_future, traits_evicted, preferences_evicted, notes_cut, superseded_by_missing)."""

    scope_key: str
    kind: str
    where: str
    id: str
    message: str  # English; `said` (when there is one) says it in the reader's language (`wording`)
    said: NotRequired[dict[str, Any]]


@dataclass(kw_only=True)
class ImportReport(Report):
    format: str
    file_name: str = ""
    dry_run: bool
    episodes: int = 0
    profiles: int = 0
    # Issue 20: keyed facts and window messages written (a dry run: that would be), not the file's:
    # a fact already there with its value, or a message its window does not keep, is not counted.
    facts: int = 0
    messages: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    scopes: dict[str, ScopeTally] = field(default_factory=dict)  # by scope_key; a list in JSON
    conflict_count: int = 0
    conflicts: list[Conflict] = field(default_factory=list)  # the first MAX_CONFLICTS_LISTED
    skipped_deleted: int = 0
    skipped: list[Conflict] = field(default_factory=list)  # the first MAX_CONFLICTS_LISTED
    warning_count: int = 0
    warnings: list[ItemWarning] = field(default_factory=list)  # the first MAX_CONFLICTS_LISTED
    indexed: int = 0
    not_indexed: int = 0
    # {scope_key: {"skipped_deleted": n, "warnings": n}} for each scope's audit entry (not in JSON:
    # ScopeTally is the per-scope JSON shape).
    scope_extras: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImportReport:
        """The report back from `as_dict()` (a resumed job's, stored when its write committed)."""
        names = {f.name for f in fields(cls)} - {"scopes", "scope_extras"}
        report = cls(**{key: value for key, value in data.items() if key in names})
        report.scopes = {scope["scope_key"]: scope for scope in data.get("scopes", [])}
        return report

    def json_scopes(self) -> list[ScopeTally]:
        return list(self.scopes.values())

    def json_scope_extras(self) -> object:
        return OMIT

    def summary(self) -> str:
        verb = "would import" if self.dry_run else "imported"
        text = (
            f"{verb} {self.episodes} episodes and {self.profiles} profiles into {len(self.scopes)} scope(s)"
            f" ({', '.join(f'{k} {v}' for k, v in sorted(self.statuses.items())) or 'no episodes'})"
            f", {self.conflict_count} conflict(s)"
        )
        if self.facts or self.messages:
            text += f", {self.facts} keyed facts and {self.messages} window messages"
        if self.skipped_deleted:
            text += f", {self.skipped_deleted} deleted skipped"
        if self.warning_count:
            text += f", {self.warning_count} warning(s)"
        if not self.dry_run and self.not_indexed:
            text += f"; {self.not_indexed} episodes not indexed yet (run `manage.py reindex`)"
        return text

    def scope(self, keys: ScopeKeys) -> ScopeTally:
        """The tally of the scope `keys` (created empty on first use)."""
        return self.scopes.setdefault(
            keys.scope_key,
            ScopeTally(
                scope_key=keys.scope_key,
                user_key=keys.user_key,
                bot_uuid=keys.bot_uuid,
                session_name=keys.session_name,
                isolation=keys.isolation,
                episodes=0,
                profiles=0,
                statuses={},
                conflicts=0,
            ),
        )

    def conflict(self, keys: ScopeKeys, kind: str, where: str, reason: str, old_id: str = "") -> None:
        self.conflict_count += 1
        self.scope(keys)["conflicts"] += 1
        if len(self.conflicts) < MAX_CONFLICTS_LISTED:
            self.conflicts.append(Conflict(scope_key=keys.scope_key, kind=kind, where=where, id=old_id, reason=reason))

    def skip_deleted(self, keys: ScopeKeys, where: str, old_id: str = "") -> None:
        """An episode the source had deleted: never imported (it would come back as active)."""
        self.skipped_deleted += 1
        self.scope(keys)
        extras = self.scope_extras.setdefault(keys.scope_key, {"skipped_deleted": 0, "warnings": 0})
        extras["skipped_deleted"] += 1
        if len(self.skipped) < MAX_CONFLICTS_LISTED:
            self.skipped.append(
                Conflict(
                    scope_key=keys.scope_key,
                    kind="deleted",
                    where=where,
                    id=old_id,
                    reason=gettext_noop("deleted in the source; not imported"),
                )
            )

    def warn(self, keys: ScopeKeys, kind: str, where: str, message: str | Said, old_id: str = "") -> None:
        self.warning_count += 1
        extras = self.scope_extras.setdefault(keys.scope_key, {"skipped_deleted": 0, "warnings": 0})
        extras["warnings"] += 1
        if len(self.warnings) < MAX_CONFLICTS_LISTED:
            item = ItemWarning(scope_key=keys.scope_key, kind=kind, where=where, id=old_id, message=str(message))
            if isinstance(message, Said):
                item["said"] = message.stored()
            self.warnings.append(item)
