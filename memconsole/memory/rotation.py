"""Encryption-at-rest bookkeeping: key rotation and the census the health check reports.

`rotate_keys` re-encrypts every sealed field (episode content, profile and profile-version
payloads, audit payloads, injection-snapshot payloads) under the newest key of
MEMCONSOLE_FERNET_KEYS, and encrypts rows written before keys were configured. It walks each
table by primary key in batches, each batch in its own transaction with its rows locked, so it
can run beside live traffic and be killed at any point: a row is rewritten together with its
`encrypted` flag or not at all, and a row already under the newest key is skipped, so running it
again simply resumes (nothing is encrypted twice). Once it reports no unreadable rows, the older
keys can be removed from the setting.

Audit payloads are re-encrypted as they are: their digest is over the plaintext, so the chain
still verifies. A run writes `key_rotation_started` first and `key_rotation` with the counts at
the end, so a run that died half way is visible in the audit log as a start without an end.

Episodes encrypted for the first time lose the `tags` field of their vector metadata (no
readable content in the index once encryption is on); the vector is marked not current until
that is done, so `manage.py reindex` finishes the job if the index is unreachable.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils.translation import gettext_noop

from memconsole.lib import crypto, vectors

from . import audit, rowstate, tamper
from .audit import Actor
from .botmemory_models import Fact, FactVersion, WindowMessage
from .episode_extras import EpisodeMetadata
from .install import InstallState
from .models import AuditEntry, Episode, InjectionSnapshot, Profile, ProfileVersion
from .reports import Report
from .sync import metadata_patch, vector_metadata
from .wording import said

Progress = Callable[[str, int, int], None]

SealedModel = (
    type[Episode]
    | type[EpisodeMetadata]
    | type[Profile]
    | type[ProfileVersion]
    | type[AuditEntry]
    | type[InjectionSnapshot]
    | type[Fact]
    | type[FactVersion]
    | type[WindowMessage]
)

# (name, model, the sealed column's field name)
MAX_BATCH = 100_000
SEALED_TABLES: tuple[tuple[str, SealedModel, str], ...] = (
    ("episodes", Episode, "content_stored"),
    ("episode_metadata", EpisodeMetadata, "payload_stored"),
    ("facts", Fact, "text_stored"),
    ("fact_versions", FactVersion, "text_stored"),
    ("window_messages", WindowMessage, "text_stored"),
    ("profiles", Profile, "payload_stored"),
    ("profile_versions", ProfileVersion, "payload_stored"),
    ("audit_entries", AuditEntry, "payload_stored"),
    ("snapshots", InjectionSnapshot, "payload_stored"),
)


def key_fingerprint(key: str) -> str:
    """A short public identifier of a key (a hash; it reveals nothing about the key)."""
    return hashlib.sha256(key.encode()).hexdigest()[:12]


@dataclass
class TableRotation(Report):
    total: int = 0
    rotated: int = 0  # was under an older key
    encrypted: int = 0  # was plain
    skipped: int = 0  # already under the newest key
    unreadable: int = 0  # no configured key opens it: left untouched
    first_unreadable: int | None = None
    refused: int = 0  # forged (`tamper`): changed outside memconsole, left untouched
    baselined: int = 0  # episodes/profiles whose state the chain had not recorded (or in format 1): recorded now


@dataclass
class RotationReport(Report):
    key_id: str
    tables: dict[str, TableRotation] = field(default_factory=dict)
    vectors_pending: int = 0
    duration_ms: int = 0
    refused_rows: list[str] = field(default_factory=list)  # the first forged rows, each with why

    @property
    def unreadable(self) -> int:
        return sum(t.unreadable for t in self.tables.values())

    @property
    def refused(self) -> int:
        return sum(t.refused for t in self.tables.values())

    @property
    def ok(self) -> bool:
        return self.unreadable == 0 and self.refused == 0

    def totals(self) -> dict[str, int]:
        return {
            name: sum(getattr(t, name) for t in self.tables.values())
            for name in ("total", "rotated", "encrypted", "skipped", "unreadable", "refused", "baselined")
        }

    def summary(self) -> str:
        t = self.totals()
        text = (
            f"{t['total']} rows under key {self.key_id}: {t['rotated']} re-encrypted, {t['encrypted']} encrypted "
            f"for the first time, {t['skipped']} already under the newest key, {t['unreadable']} unreadable "
            f"({self.duration_ms / 1000:.1f}s)"
        )
        if self.vectors_pending:
            text += f"; {self.vectors_pending} vectors still carry tags: run `python manage.py reindex`"
        for name, table in self.tables.items():
            if table.unreadable:
                text += f"; first unreadable row: {name} #{table.first_unreadable}"
                break
        if self.refused:
            text += f"; {self.refused} rows changed outside memconsole were refused (not re-sealed): " + "; ".join(
                self.refused_rows
            )
        return text

    JSON_KEYS: ClassVar[tuple[str, ...]] = (
        "key_id",
        "tables",
        "totals",
        "vectors_pending",
        "duration_ms",
        "refused",
        "refused_rows",
        "ok",
        "summary",
    )


def rotate_keys(batch: int = 500, progress: Progress | None = None, actor: Actor | None = None) -> RotationReport:
    """Re-encrypt every sealed field under the newest key (see the module docstring).

    `progress(table, done, total)` is called after each batch. Raises `ImproperlyConfigured`
    without keys. Rows no configured key opens are left as they are and counted as unreadable.
    """
    if not crypto.enabled():
        raise ImproperlyConfigured(f"Key rotation needs {crypto.SETTING} (newest key first).")
    crypto.configured_keys()  # a malformed key fails here, before anything is written
    if not 1 <= batch <= MAX_BATCH:
        raise ValueError(f"batch must be between 1 and {MAX_BATCH}")
    actor = actor or Actor.system("rotate_keys")
    started = time.monotonic()
    report = RotationReport(key_id=key_fingerprint(settings.MEMCONSOLE_FERNET_KEYS[0]))
    with transaction.atomic():
        audit.append(
            "key_rotation_started",
            actor,
            target_type="encryption",
            target_id=report.key_id,
            summary=said(gettext_noop("key rotation to key %(key)s started"), key=report.key_id),
            metadata={"key_id": report.key_id, "keys_configured": len(settings.MEMCONSOLE_FERNET_KEYS)},
        )
    checker = tamper.Checker()
    for name, model, column in SEALED_TABLES:
        report.tables[name] = _rotate_table(name, model, column, batch, progress, report, _Rules(checker, actor))
    report.duration_ms = int((time.monotonic() - started) * 1000)
    with transaction.atomic():
        audit.append(
            "key_rotation",
            actor,
            target_type="encryption",
            target_id=report.key_id,
            summary=said(
                gettext_noop("key rotation to key %(key)s: %(report)s"), key=report.key_id, report=report.summary()
            ),
            metadata=report.as_dict(),
        )
        InstallState.reseal_key_check()  # the old keys may go once every row is under the newest
    return report


@dataclass
class _Rules:
    """What a rotation checks each row against, and who records the baselines it writes."""

    checker: tamper.Checker
    actor: Actor


def _loaded_fields(model: SealedModel, column: str) -> list[str]:
    identity = rowstate.IDENTITY.get(model.__name__, ("",))[1:]
    chained = rowstate.LOADED.get(model.__name__, ())
    extra = ("user_key", "vector_current") if model is Episode else ()
    return list(dict.fromkeys(("pk", column, "encrypted", *identity, *chained, *extra)))


def _forged(row: Any, rules: _Rules) -> str | None:
    """Why a chained row (episode, profile) must not be re-sealed, or None (a row changed while the
    rotation runs is checked again against the entries appended since)."""
    reason = rules.checker.problem(row)
    if reason:
        rules.checker.refresh()
        reason = rules.checker.problem(row)
    return reason


def _rotate_table(
    name: str,
    model: SealedModel,
    column: str,
    batch: int,
    progress: Progress | None,
    report: RotationReport,
    rules: _Rules,
) -> TableRotation:
    counts = TableRotation(total=model.objects.count())
    is_episode = model is Episode
    chained = model.__name__ in rowstate.CHAINED
    fields = _loaded_fields(model, column)
    last = 0
    done = 0
    while True:
        newly_encrypted: list[int] = []
        with transaction.atomic():
            rows = list(model.objects.select_for_update().filter(pk__gt=last).order_by("pk").only(*fields)[:batch])
            if not rows:
                break
            changed = []
            baseline = []
            for row in rows:
                stored = getattr(row, column)
                identity = rowstate.identity(row)
                try:
                    reason = _forged(row, rules) if chained else None
                    if reason is None and row.encrypted:
                        newest, sealed_format = crypto.inspect(stored)
                        if newest and (sealed_format == 2 or identity is None):
                            counts.skipped += 1
                            if chained and rules.checker.outdated(row):
                                baseline.append(row)
                            continue
                    if reason is None:
                        if identity is None:
                            sealed, _ = crypto.rotate_text(stored, row.encrypted)
                        else:
                            sealed, _ = crypto.reseal_text(stored, row.encrypted, identity)
                except crypto.RowBindingError as exc:
                    reason = f"its sealed value does not open here: {exc}"
                except crypto.DecryptionError:
                    counts.unreadable += 1
                    if counts.first_unreadable is None:
                        counts.first_unreadable = row.pk
                    continue
                if reason is not None:
                    counts.refused += 1
                    if len(report.refused_rows) < tamper.NAMED:
                        label = tamper.row_name(row) if chained else f"{name} #{row.pk}"
                        report.refused_rows.append(f"{label}: {reason}")
                    continue
                if row.encrypted:
                    counts.rotated += 1
                else:
                    counts.encrypted += 1
                    if is_episode and row.vector_current:
                        row.vector_current = False
                        newly_encrypted.append(row.pk)
                setattr(row, column, sealed)
                row.encrypted = True
                changed.append(row)
                if chained and rules.checker.outdated(row):
                    baseline.append(row)
            if changed:
                model.objects.bulk_update(changed, [column, "encrypted"] + (["vector_current"] if is_episode else []))
            if baseline:
                _record_baseline(name, baseline, rules)
                counts.baselined += len(baseline)
        last = rows[-1].pk
        done += len(rows)
        if newly_encrypted:
            report.vectors_pending += _refresh_vector_metadata(newly_encrypted)
        if progress:
            progress(name, done, max(counts.total, done))
    return counts


def _record_baseline(name: str, rows: list[Any], rules: _Rules) -> None:
    """Record the state of rows written before row binding, or recorded in format 1 (inside the
    batch's transaction)."""
    audit.append(
        "row_baseline",
        rules.actor,
        target_type="rows",
        target_id=name,
        summary=said(
            gettext_noop(
                "state of %(rows)s %(table)s recorded (written before row binding or recorded in an older form)"
            ),
            rows=len(rows),
            table=name,
        ),
        metadata={"table": name, "rows": len(rows)},
        rows=rows,
    )
    rules.checker.refresh()


def _refresh_vector_metadata(pks: list[int]) -> int:
    """Rewrite the metadata of newly encrypted episodes' vectors; returns how many are left pending."""
    rows = list(Episode.objects.filter(pk__in=pks, vector_current=False).defer("content_stored"))
    by_key: dict[str, list[Episode]] = {}
    for row in rows:
        by_key.setdefault(row.user_key, []).append(row)
    pending = 0
    for user_key, episodes in by_key.items():
        try:
            current = vectors.get(user_key, [e.episode_id for e in episodes])
            present = [e for e in episodes if e.episode_id in current]
            vectors.update_metadata(
                user_key,
                [e.episode_id for e in present],
                [metadata_patch(current[e.episode_id]["metadata"], vector_metadata(e)) for e in present],
            )
        except vectors.VectorIndexError:
            pending += len(episodes)
            continue
        # A vector that was missing stays not current, for reindex.
        Episode.objects.filter(pk__in=[e.pk for e in present]).update(vector_current=True)
        pending += len(episodes) - len(present)
    return pending


@dataclass
class TableCensus:
    rows: int = 0
    plain: int = 0
    newest: int = 0
    older: int = 0
    unreadable: int = 0
    first_unreadable: int | None = None
    old_format: int = 0  # encrypted without the row's identity (format 1): `rotate_keys` re-seals them

    @property
    def encrypted(self) -> int:
        return self.newest + self.older + self.unreadable


def encryption_census(batch: int = 2000) -> dict[str, TableCensus]:
    """For each sealed table: plain rows, and encrypted rows under the newest key, an older
    configured key, or no configured key at all (unreadable)."""
    keys_configured = crypto.enabled()
    out = {}
    for name, model, column in SEALED_TABLES:
        census = TableCensus(rows=model.objects.count())
        census.plain = model.objects.filter(encrypted=False).count()
        bound = model.__name__ in rowstate.IDENTITY
        last = 0
        while True:
            chunk = list(
                model.objects.filter(encrypted=True, pk__gt=last).order_by("pk").values_list("pk", column)[:batch]
            )
            if not chunk:
                break
            for pk, stored in chunk:
                try:
                    if not keys_configured:
                        raise crypto.DecryptionError("no keys")
                    newest, sealed_format = crypto.inspect(stored)
                    if newest:
                        census.newest += 1
                    else:
                        census.older += 1
                    if bound and sealed_format == 1:
                        census.old_format += 1
                except crypto.DecryptionError:
                    census.unreadable += 1
                    if census.first_unreadable is None:
                        census.first_unreadable = pk
            last = chunk[-1][0]
        out[name] = census
    return out
