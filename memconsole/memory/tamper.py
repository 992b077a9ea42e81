"""Memory rows checked against the audit chain: tamper evidence for the rows themselves
(docs/design.md §6).

Every audit entry records a keyed digest of the after-state of the episodes and profiles it
changed (`AuditEntry.row_states`, covered by the entry's HMAC; `rowstate`). `Checker` walks those
entries once (verifying each one's HMAC) and keeps the last digest recorded for each row; a row is
then forged when

- its sealed content or payload was sealed for another row (`crypto.RowBindingError`: copied from
  another episode or profile, across scopes or bots, or the row's identity fields were changed), or
- its state differs from the last state the chain recorded for it (status, importance, kind,
  sender, scope, content... changed outside memconsole; a state recorded before format 2 is
  compared in format 1, `rowstate.ADDED_IN_2`), or
- its tag text (`tags_text`, what the tag filter and bulk actions select by) is not its tags'.

A row with no recorded state was written before row binding (or inserted outside memconsole); it
is counted, not condemned, and `rotate_keys` records its state as a baseline. The health check
(`row_integrity`) reports forged rows as ERROR by name; `reindex` and `rotate_keys` refuse them.
Rows are read in primary-key batches (`paging.batches_by_pk`), a few fields each.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.db import models

from memconsole.lib import crypto

from . import audit, rowstate
from .models import AuditEntry, Episode, Profile, tags_text
from .paging import batches_by_pk, chunks
from .reports import Report

BATCH = 1000
NAMED = 10  # forged rows named in a report (all are counted)

# What the walk over the chain loads of an entry: its structural (HMAC-covered) fields and its hash.
_ENTRY_FIELDS = ("pk", "entry_hash", *audit.HASHED_FIELDS)


@dataclass
class ForgedRow:
    table: str  # "episodes" | "profiles"
    pk: int
    name: str  # the episode id, or "session profile #12"
    reason: str

    def __str__(self) -> str:
        return f"{self.name}: {self.reason}"


def row_name(row: Any) -> str:
    if isinstance(row, Episode):
        return f"episode {row.episode_id}"
    return f"{row.type} profile #{row.pk}"


class Checker:
    """The last state the chain recorded for each row, read once; then `problem(row)` per row."""

    def __init__(self) -> None:
        self.key = audit.audit_key()
        self.recorded: dict[str, tuple[int, str]] = {}  # ref -> (seq of the entry, digest)
        self.chain_problems: list[str] = []
        self._last_pk = 0
        self.refresh()

    def refresh(self) -> None:
        """Read the entries appended since the last read (a row changed during a check is re-read)."""
        entries = AuditEntry.objects.exclude(row_states="").filter(pk__gt=self._last_pk).only(*_ENTRY_FIELDS)
        for chunk in batches_by_pk(entries, BATCH):
            for entry in chunk:
                if not hmac.compare_digest(entry.entry_hash, audit.entry_hash(entry)):
                    self.chain_problems.append(
                        f"entry #{entry.seq} ({entry.audit_id}): its recorded row states or fields were changed"
                    )
                    continue
                try:
                    states = rowstate.decode(entry.row_states)
                except ValueError:
                    self.chain_problems.append(f"entry #{entry.seq}: its recorded row states are unreadable")
                    continue
                for ref, digest in states.items():
                    self.recorded[ref] = (entry.seq, digest)
            self._last_pk = chunk[-1].pk

    def problem(self, row: Any) -> str | None:
        """Why `row` is forged, or None (also None when nothing is recorded for it: `unrecorded`).

        Raises `crypto.DecryptionError` (not `RowBindingError`) when no configured key opens the row:
        that is a missing key, for the encryption check to report, not a forgery."""
        recorded = self.recorded.get(rowstate.ref(row))
        try:
            digest = rowstate.digest_like(row, self.key, recorded[1] if recorded else "")
        except crypto.RowBindingError as exc:
            return f"its {'content' if isinstance(row, Episode) else 'payload'} does not open here: {exc}"
        if isinstance(row, Episode) and row.tags_text != tags_text(row.tags):
            return "its tag text, which the tag filter and bulk actions select by, does not match its tags"
        if recorded is None or hmac.compare_digest(recorded[1], digest):
            return None
        return (
            f"it differs from the state audit entry #{recorded[0]} recorded for it (changed outside memconsole: "
            "status, importance, kind, tags, sender, scope or content)"
        )

    def unrecorded(self, row: Any) -> bool:
        return rowstate.ref(row) not in self.recorded

    def outdated(self, row: Any) -> bool:
        """No state is recorded for the row, or one in format 1 only (`rotate_keys` records it anew)."""
        recorded = self.recorded.get(rowstate.ref(row))
        return recorded is None or not recorded[1].startswith(rowstate.FORMAT_2)

    def forged(self, rows: Iterable[Any]) -> dict[int, str]:
        """{pk: reason} of the forged rows among `rows` (unreadable rows are skipped). A row that
        looks forged is checked again against the entries appended since (changed meanwhile)."""
        out = {}
        refreshed = False
        for row in rows:
            try:
                reason = self.problem(row)
                if reason and not refreshed:
                    self.refresh()
                    refreshed = True
                    reason = self.problem(row)
            except crypto.DecryptionError:
                continue
            if reason:
                out[row.pk] = reason
        return out


CHECKED: tuple[tuple[str, type[models.Model]], ...] = (("episodes", Episode), ("profiles", Profile))


def loaded(model: type[models.Model]) -> models.QuerySet[Any]:
    """The rows of `model` with what a state check reads of them (and nothing else)."""
    return models.QuerySet(model).only(*rowstate.LOADED[model.__name__])


@dataclass
class RowCheckReport(Report):
    episodes: int = 0
    profiles: int = 0
    unrecorded: int = 0
    unreadable: int = 0
    forged: list[ForgedRow] = field(default_factory=list)
    forged_count: int = 0
    chain_problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.forged_count and not self.chain_problems

    def summary(self) -> str:
        checked = f"{self.episodes} episodes and {self.profiles} profiles checked against the audit chain"
        if self.ok:
            return checked
        named = "; ".join(str(row) for row in self.forged[:NAMED])
        more = f" (and {self.forged_count - NAMED} more)" if self.forged_count > NAMED else ""
        text = f"{self.forged_count} rows were changed outside memconsole: {named}{more}" if self.forged_count else ""
        if self.chain_problems:
            text += ("; " if text else "") + "; ".join(self.chain_problems[:3])
        return f"{text} ({checked})"

    JSON_KEYS: ClassVar[tuple[str, ...]] = (
        "episodes",
        "profiles",
        "unrecorded",
        "unreadable",
        "forged_count",
        "forged",
        "chain_problems",
        "ok",
        "summary",
    )


def check_rows(batch: int = BATCH) -> RowCheckReport:
    """Every episode and profile against its sealed identity and the chain's last state for it."""
    checker = Checker()
    report = RowCheckReport()
    suspects: dict[type[models.Model], list[int]] = {}
    for name, model in CHECKED:
        for chunk in batches_by_pk(loaded(model), batch):
            setattr(report, name, getattr(report, name) + len(chunk))
            for row in chunk:
                try:
                    reason = checker.problem(row)
                except crypto.DecryptionError:
                    report.unreadable += 1
                    continue
                if reason:
                    suspects.setdefault(model, []).append(row.pk)
                elif checker.unrecorded(row):
                    report.unrecorded += 1
    # A row changed while the check ran is newer than the chain read first: read both again.
    if suspects:
        checker.refresh()
        for name, model in CHECKED:
            for row in _rows(model, suspects.get(model, [])):
                reason = checker.problem(row)
                if reason:
                    report.forged_count += 1
                    if len(report.forged) < NAMED:
                        report.forged.append(ForgedRow(name, row.pk, row_name(row), reason))
    report.chain_problems = checker.chain_problems
    return report


def _rows(model: type[models.Model], pks: list[int]) -> Iterator[Any]:
    for batch in chunks(pks, BATCH):
        yield from loaded(model).filter(pk__in=batch).order_by("pk")
