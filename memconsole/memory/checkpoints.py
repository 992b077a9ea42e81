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
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, timedelta
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
            return _take()
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
