"""Audit checkpoints: every chain's head anchored in one chained record (docs/design.md §6).

Each space has its own audit chain (`audit`), so an edit, insertion, deletion or reordering inside
a chain breaks its links; what a single chain cannot show is being cut short at the end together
with its head row, or a whole chain deleted. A checkpoint records the heads that moved since the
previous checkpoint and a root hash over every chain's head, is linked to the previous
checkpoint, and is signed with the audit key. `replay` re-derives every root from the recorded
heads and hands the anchored (chain, seq, hash) triples to the chain walk, which checks that each
still exists: a chain can then lose nothing at or before its last checkpoint unseen.

Checkpoints are taken every MEMCONSOLE_AUDIT_CHECKPOINT_SECONDS by the job worker (`take_if_due`),
by every health check, and by `manage.py audit_checkpoint`. Taking one reads the heads without
locking them: writers never wait on it.

What the database alone cannot show is its newest checkpoints (or all of them) deleted together
with what they anchored. Each process that takes a checkpoint therefore also keeps the newest one
outside the database, in the file MEMCONSOLE_AUDIT_ANCHOR (on by default in production) and in its
log; `replay` reports a checkpoint that file names and the database no longer holds.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from .auditkey import GENESIS, audit_key
from .models import AuditCheckpoint, AuditHead, CheckpointHead, canonical_json

log = logging.getLogger("memconsole.audit")

Head = tuple[int, str]  # (seq of a chain's last entry, its entry_hash)


def root_of(heads: dict[str, Head]) -> str:
    """The hash over every chain's head (sorted by chain): what a checkpoint anchors."""
    listed = [[chain, seq, entry_hash] for chain, (seq, entry_hash) in sorted(heads.items())]
    return hashlib.sha256(canonical_json(listed).encode()).hexdigest()


def checkpoint_hash(checkpoint: AuditCheckpoint) -> str:
    stamp = checkpoint.created_at.astimezone(UTC).isoformat(timespec="microseconds")
    fields = [
        checkpoint.seq,
        stamp,
        checkpoint.heads,
        checkpoint.chains,
        checkpoint.root,
        checkpoint.prev_hash,
    ]
    return hmac.new(audit_key(), b"checkpoint:" + canonical_json(fields).encode(), hashlib.sha256).hexdigest()


def take() -> AuditCheckpoint | None:
    """Record a checkpoint of every chain's head, or None when no head moved since the last one
    (or another checkpoint was being taken at the same moment)."""
    try:
        with transaction.atomic():
            checkpoint = _take()
            if checkpoint is not None:
                transaction.on_commit(lambda: keep_outside(checkpoint))
            return checkpoint
    except IntegrityError:  # a concurrent checkpoint took this seq: that one anchors the same heads
        log.info("an audit checkpoint was taken concurrently; this one is skipped")
        return None


def _take() -> AuditCheckpoint | None:
    last = AuditCheckpoint.objects.select_for_update().order_by("-seq").first()
    current = _heads(AuditHead.objects.filter(seq__gt=0))
    recorded = _heads(CheckpointHead.objects.all())
    moved = {chain: head for chain, head in current.items() if recorded.get(chain) != head}
    if not moved:
        return None
    anchored = recorded | moved
    checkpoint = AuditCheckpoint(
        seq=last.seq + 1 if last else 1,
        created_at=timezone.now(),
        heads=json.dumps([[chain, seq, entry_hash] for chain, (seq, entry_hash) in sorted(moved.items())]),
        chains=len(anchored),
        root=root_of(anchored),
        prev_hash=last.checkpoint_hash if last else GENESIS,
    )
    checkpoint.checkpoint_hash = checkpoint_hash(checkpoint)
    checkpoint.save(force_insert=True)
    CheckpointHead.objects.bulk_create(
        [CheckpointHead(chain=chain, seq=seq, entry_hash=entry_hash) for chain, (seq, entry_hash) in moved.items()],
        update_conflicts=True,
        unique_fields=["chain"],
        update_fields=["seq", "entry_hash"],
    )
    return checkpoint


def _heads(rows: QuerySet[Any]) -> dict[str, Head]:
    return {chain: (seq, entry_hash) for chain, seq, entry_hash in rows.values_list("chain", "seq", "entry_hash")}


def take_if_due() -> AuditCheckpoint | None:
    """A checkpoint when the newest is older than MEMCONSOLE_AUDIT_CHECKPOINT_SECONDS (or none exists)."""
    newest = AuditCheckpoint.objects.order_by("-seq").values_list("created_at", flat=True).first()
    every = timedelta(seconds=settings.MEMCONSOLE_AUDIT_CHECKPOINT_SECONDS)
    if newest is not None and timezone.now() - newest < every:
        return None
    return take()


@dataclass
class Anchors:
    """What the checkpoints anchor: `expected[chain][seq]` is the entry hash some checkpoint recorded
    for that chain at that seq, `last` each chain's newest anchored head; `problem` a broken checkpoint."""

    expected: dict[str, dict[int, str]] = field(default_factory=dict)
    last: dict[str, Head] = field(default_factory=dict)
    checkpoints: int = 0
    problem: str = ""


def replay(batch: int = 500) -> Anchors:
    """Walk the checkpoints in order: each links to the previous, its signature holds, no chain's
    head goes back, and its root matches every head recorded so far."""
    anchors = Anchors()
    previous = GENESIS
    expected_seq = 1
    while True:
        rows = list(AuditCheckpoint.objects.filter(seq__gte=expected_seq).order_by("seq")[:batch])
        if not rows:
            anchors.problem = outside_problem()
            return anchors
        for checkpoint in rows:
            if problem := _checkpoint_problem(checkpoint, expected_seq, previous, anchors):
                anchors.problem = f"audit checkpoint #{expected_seq}: {problem}"
                return anchors
            previous = checkpoint.checkpoint_hash
            expected_seq += 1
            anchors.checkpoints += 1


def _checkpoint_problem(checkpoint: AuditCheckpoint, expected_seq: int, previous: str, anchors: Anchors) -> str:
    if checkpoint.seq != expected_seq:
        return "is missing (deleted)"
    if checkpoint.prev_hash != previous:
        return "does not link to the previous checkpoint"
    if not hmac.compare_digest(checkpoint.checkpoint_hash, checkpoint_hash(checkpoint)):
        return "its fields were changed"
    try:
        moved = [(str(chain), int(seq), str(entry_hash)) for chain, seq, entry_hash in json.loads(checkpoint.heads)]
    except (ValueError, TypeError) as exc:
        return f"its heads are unreadable: {exc}"
    for chain, seq, entry_hash in moved:
        if chain in anchors.last and seq < anchors.last[chain][0]:
            return f"the head of {chain_label(chain)} goes back from #{anchors.last[chain][0]} to #{seq}"
        anchors.last[chain] = (seq, entry_hash)
        anchors.expected.setdefault(chain, {})[seq] = entry_hash
    if len(anchors.last) != checkpoint.chains or root_of(anchors.last) != checkpoint.root:
        return "its root does not match the heads it records"
    return ""


def chain_label(chain: str) -> str:
    return f"the chain of space {chain}" if chain else "the install-wide chain"


# --- the newest checkpoint, kept outside the database ---------------------------------------------


class AnchorError(ValueError):
    """The file MEMCONSOLE_AUDIT_ANCHOR names cannot be read as an anchor."""


def anchor_path() -> Path | None:
    value = settings.MEMCONSOLE_AUDIT_ANCHOR
    return Path(value) if value else None


def read_anchor(path: Path) -> Head | None:
    """(seq, checkpoint_hash) the file records, or None when there is no file yet."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return int(data["seq"]), str(data["checkpoint_hash"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise AnchorError(f"{type(exc).__name__}: {exc}") from exc


def keep_outside(checkpoint: AuditCheckpoint, *, replace: bool = False) -> None:
    """Log a committed checkpoint and write it to MEMCONSOLE_AUDIT_ANCHOR unless the file already
    records a newer one (`replace`: whatever it records). A failed write is logged, never raised:
    the checkpoint itself is committed."""
    log.info("audit checkpoint #%s committed: %s", checkpoint.seq, checkpoint.checkpoint_hash)
    path = anchor_path()
    if path is None:
        return
    try:
        if not replace:
            current = _readable_anchor(path)
            if current is not None and current[0] >= checkpoint.seq:
                return
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "seq": checkpoint.seq,
            "checkpoint_hash": checkpoint.checkpoint_hash,
            "created_at": checkpoint.created_at.astimezone(UTC).isoformat(),
        }
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".audit-anchor-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(record, out)
        Path(temporary).replace(path)
    except OSError as exc:
        log.error("the audit anchor %s could not be written (checkpoint #%s): %s", path, checkpoint.seq, exc)


def _readable_anchor(path: Path) -> Head | None:
    try:
        return read_anchor(path)
    except AnchorError:
        return None  # overwritten by the newer checkpoint (the health check reported it meanwhile)


def outside_problem() -> str:
    """Why the checkpoint kept outside the database does not match the database's, or ""."""
    path = anchor_path()
    if path is None:
        return ""
    try:
        anchored = read_anchor(path)
    except AnchorError as exc:
        return f"the checkpoint kept outside the database in {path} is unreadable ({exc})"
    if anchored is None:
        return ""
    seq, expected = anchored
    stored = AuditCheckpoint.objects.filter(seq=seq).values_list("checkpoint_hash", flat=True).first()
    if stored is None:
        return (
            f"audit checkpoint #{seq}, which {path} keeps outside the database, is missing: checkpoints "
            "were deleted, or the database was restored from a backup older than that file (after a "
            "deliberate restore, run manage.py audit_checkpoint --reanchor)"
        )
    if not hmac.compare_digest(stored, expected):
        return f"audit checkpoint #{seq} is not the one {path} keeps outside the database"
    return ""


def reanchor() -> AuditCheckpoint | None:
    """Keep the database's newest checkpoint outside it, whatever the file recorded (after a
    deliberate restore of an older backup); None when the database has no checkpoint."""
    newest = AuditCheckpoint.objects.order_by("-seq").first()
    if newest is not None:
        keep_outside(newest, replace=True)
    return newest
