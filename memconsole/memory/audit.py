"""The audit log as HMAC hash chains, one per space (docs/design.md §6).

Each entry stores the previous entry's hash in its chain and an HMAC over its structural fields
plus a keyed digest of its payload. Everything that can carry personal content (summary, before,
after, metadata, sender_name) lives in the payload, so erasure can redact a payload
(`redacted=True`, digest kept) while edits, insertions and deletions of entries are still detected;
a redacted entry verifies only in the erasure form, bound to its erasure's receipt (`redactions`).

An entry's chain is its scope_key ("" for install-wide entries: tokens, users, erasure receipts,
and every entry written before per-space chains, whose hashes stay as they were). Appends to one
chain are serialised by its tip (`AuditHead`, one row per chain) locked with SELECT ... FOR UPDATE
on PostgreSQL, so writes to different spaces never wait on each other; SQLite transactions are
BEGIN IMMEDIATE (settings.py), which takes the database write lock up front. `checkpoints`
anchors every chain's head in a chained checkpoint, so a chain cut short is still detected.
`append` must run inside the caller's `transaction.atomic()`, so an entry lands exactly when the
change it describes does.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from . import checkpoints, redactions, rowstate
from .actors import Actor as Actor  # re-exported: audit.Actor, as every caller names it
from .auditkey import GENESIS as GENESIS  # re-exported: audit.GENESIS, audit.audit_key, audit.key_id
from .auditkey import audit_key as audit_key
from .auditkey import key_id as key_id
from .models import AuditEntry, AuditHead, canonical_json
from .reports import Report
from .wording import Said

SUMMARY_MAX = 240

# The batch id of the bulk action running in this context (`batch()`), "" outside one.
_BATCH: ContextVar[str] = ContextVar("audit_batch", default="")


@contextmanager
def batch(batch_id: str = "") -> Iterator[str]:
    """Group every entry appended inside the block into one batch (a bulk console action): each
    stores the yielded id (`batch_id`, or a new one) in `AuditEntry.batch_id` and its payload."""
    batch_id = batch_id or uuid.uuid4().hex
    token = _BATCH.set(batch_id)
    try:
        yield batch_id
    finally:
        _BATCH.reset(token)


def current_batch() -> str:
    """The id of the batch being appended (`batch()`), "" outside one."""
    return _BATCH.get()


@dataclass
class _Buffer:
    heads: dict[str, AuditHead]
    entries: list[AuditEntry]


# The entries appended inside `buffered()` and not yet written, with their chains' locked heads.
_BUFFER: ContextVar[_Buffer | None] = ContextVar("audit_buffer", default=None)


@contextmanager
def buffered() -> Iterator[None]:
    """Inside the caller's `transaction.atomic()`: every entry appended in the block is chained as
    `append` chains it, each chain's head locked once, and all are written in one statement when the
    block ends (a batch of episodes: one INSERT, not one INSERT and one head UPDATE an entry). An
    error in the block writes none of them, and the transaction rolls back. Nothing in the block may
    read the entries back from the database."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit.buffered must run inside transaction.atomic()")
    buffer = _Buffer({}, [])
    token = _BUFFER.set(buffer)
    try:
        yield
    finally:
        _BUFFER.reset(token)
    AuditEntry.objects.bulk_create(buffer.entries)
    for head in buffer.heads.values():
        head.save(update_fields=["seq", "entry_hash"])


def _head(chain: str) -> AuditHead:
    buffer = _BUFFER.get()
    if buffer is None:
        return _heads_for_update([chain])[chain]
    if chain not in buffer.heads:
        buffer.heads[chain] = _heads_for_update([chain])[chain]
    return buffer.heads[chain]


def payload_digest(payload: dict[str, Any]) -> str:
    return hmac.new(audit_key(), b"payload:" + canonical_json(payload).encode(), hashlib.sha256).hexdigest()


# The two structural fields that can name a person (sender_id, and target_id such as
# "speaker:<id>") are covered by the chain through a keyed digest, not their raw value, so that
# erasure can replace them by `ERASED_PREFIX + digest` and the entry still verifies.
ERASED_PREFIX = "erased:"


def subject_digest(value: str) -> str:
    """Keyed digest standing in for a person's identifier once it is erased."""
    return hmac.new(audit_key(), b"subject:" + value.encode("utf-8"), hashlib.sha256).hexdigest()


def sealed_field(value: str) -> str:
    if not value:
        return ""
    if value.startswith(ERASED_PREFIX):
        return value[len(ERASED_PREFIX) :]
    return subject_digest(value)


def erase_identifiers(entry: AuditEntry, *, sender_id: bool, target_id: bool) -> None:
    """Replace an entry's sender_id and/or target_id by their digests (erasure); the chain still verifies."""
    fields = []
    if sender_id and entry.sender_id and not entry.sender_id.startswith(ERASED_PREFIX):
        entry.sender_id = ERASED_PREFIX + sealed_field(entry.sender_id)
        fields.append("sender_id")
    if target_id and entry.target_id and not entry.target_id.startswith(ERASED_PREFIX):
        entry.target_id = ERASED_PREFIX + sealed_field(entry.target_id)
        fields.append("target_id")
    if fields:
        entry.save(update_fields=fields)


# The fields an entry's HMAC covers (`_structural`, in its order): what a walk over the chain loads.
HASHED_FIELDS = (
    "chain",
    "seq",
    "audit_id",
    "timestamp",
    "operation",
    "scope_key",
    "user_key",
    "actor_type",
    "actor",
    "sender_id",
    "target_type",
    "target_id",
    "query_id",
    "payload_digest",
    "prev_hash",
    "row_states",
)


def _structural(entry: AuditEntry) -> bytes:
    stamp = entry.timestamp.astimezone(UTC).isoformat(timespec="microseconds")
    fields = [
        entry.seq,
        entry.audit_id,
        stamp,
        entry.operation,
        entry.scope_key,
        entry.user_key,
        entry.actor_type,
        entry.actor,
        sealed_field(entry.sender_id),
        entry.target_type,
        sealed_field(entry.target_id),
        entry.query_id,
        entry.payload_digest,
        entry.prev_hash,
    ]
    if entry.row_states:  # only entries that record row states (older entries hash as they always did)
        fields.append(entry.row_states)
    if entry.chain:  # per-space chains (issue 22); the install-wide chain "" hashes as it always did
        fields.append(["chain", entry.chain])
    return canonical_json(fields).encode()


def entry_hash(entry: AuditEntry) -> str:
    return hmac.new(audit_key(), _structural(entry), hashlib.sha256).hexdigest()


def _heads_for_update(chains: Iterable[str]) -> dict[str, AuditHead]:
    """Lock these chains' heads (created when missing), in chain order so that two transactions
    locking several never wait on each other in a circle."""
    wanted = sorted(set(chains))
    heads = AuditHead.objects.select_for_update().filter(chain__in=wanted).order_by("chain")
    found = {head.chain: head for head in heads}
    if missing := [chain for chain in wanted if chain not in found]:
        AuditHead.objects.bulk_create([AuditHead(chain=chain) for chain in missing], ignore_conflicts=True)
        found = {head.chain: head for head in heads.all()}
    return found


def lock_chain(*chains: str) -> None:
    """Lock these chains' heads (a space's chain is its scope_key; no argument: the install-wide
    chain "") until the end of the caller's `transaction.atomic()`: nothing is appended to them
    until it commits.

    Lock order: remember, archive/restore and delete lock their chain's head *before* the
    per-user_key counters (`EpisodeCounts`), so a transaction that recounts (imports, erasure) must
    lock the heads before it recounts too, or the two wait on each other (a deadlock on PostgreSQL).
    A transaction that appends to several chains locks them all first, in one call.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit.lock_chain must run inside transaction.atomic()")
    _heads_for_update(chains or ("",))


def lock_chains_where(condition: Q) -> None:
    """Lock the heads of every existing chain matching `condition` (on `chain`), and of the
    install-wide chain, in chain order (erasure: every space of a bot)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit.lock_chains_where must run inside transaction.atomic()")
    chains = set(AuditHead.objects.filter(condition).values_list("chain", flat=True))
    _heads_for_update(chains | {""})


def heads() -> dict[str, int]:
    """{chain: seq of its last entry} as committed now (a high-water mark per chain)."""
    return dict(AuditHead.objects.values_list("chain", "seq"))


def appended_since(marks: dict[str, int]) -> Q:
    """The entries appended after `heads()` returned `marks` (call with the chains locked)."""
    since = Q(pk__in=[])
    for chain, seq in heads().items():
        if seq > marks.get(chain, 0):
            since |= Q(chain=chain, seq__gt=marks.get(chain, 0))
    return since


def append(
    operation: str,
    actor: Actor,
    *,
    scope_key: str = "",
    user_key: str = "",
    sender_id: str = "",
    sender_name: str = "",
    target_type: str = "",
    target_id: str = "",
    query_id: str = "",
    summary: str | Said = "",
    before: Any = None,
    after: Any = None,
    metadata: dict[str, Any] | None = None,
    rows: Iterable[Any] = (),
    audit_id: str = "",
) -> AuditEntry:
    """Append one entry to the chain. Call inside `transaction.atomic()`, after saving the rows
    the entry is about: it records the after-state of every episode and profile sealed or saved in
    the transaction since the previous append (`rowstate`), and of `rows` (rows changed with
    `QuerySet.update()` or `bulk_update()`, which no signal reports: pass them refreshed). A
    `Said` summary (`wording`) is stored in English and, under "said", with what translates it.
    `audit_id`: one chosen beforehand (an erasure's receipt, which its redactions name)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit.append must run inside transaction.atomic()")
    row_states = rowstate.encode(rowstate.digests([*rowstate.take(), *rows], audit_key()))
    if isinstance(summary, Said):
        summary = summary.cut(SUMMARY_MAX)
    payload = {
        "summary": str(summary)[:SUMMARY_MAX],
        "sender_name": sender_name,
        "before": before,
        "after": after,
        "metadata": metadata or {},
    }
    if isinstance(summary, Said):
        payload["said"] = summary.stored()
    batch_id = current_batch()
    if batch_id:
        payload["batch_id"] = batch_id
    chain = scope_key
    head = _head(chain)
    entry = AuditEntry(
        chain=chain,
        seq=head.seq + 1,
        audit_id=audit_id or uuid.uuid4().hex,
        timestamp=timezone.now(),
        operation=operation,
        scope_key=scope_key,
        user_key=user_key,
        actor_type=actor.type,
        actor=actor.label[:255],
        sender_id=sender_id,
        target_type=target_type,
        target_id=str(target_id)[:255],
        query_id=query_id[:255],
        payload_digest=payload_digest(payload),
        prev_hash=head.entry_hash,
        batch_id=batch_id,
        row_states=row_states,
    )
    entry.set_payload(payload)
    entry.entry_hash = entry_hash(entry)
    head.seq = entry.seq
    head.entry_hash = entry.entry_hash
    buffer = _BUFFER.get()
    if buffer is not None:
        buffer.entries.append(entry)  # written when `buffered()` ends
        return entry
    entry.save(force_insert=True)
    head.save(update_fields=["seq", "entry_hash"])
    return entry


@dataclass(frozen=True)
class ChainReport(Report):
    ok: bool
    checked: int
    broken_seq: int | None = None
    broken_audit_id: str | None = None
    reason: str = ""
    chain: str = ""  # the chain of the broken entry
    chains: int = 0
    checkpoints: int = 0

    def __str__(self) -> str:
        if self.ok:
            return f"audit chain OK ({self.checked} entries in {_count(self.chains, 'chain')}, {_count(self.checkpoints, 'checkpoint')})"
        if self.broken_seq is None:
            return f"audit chain broken: {self.reason}"
        where = f"entry #{self.broken_seq}" + (f" ({self.broken_audit_id})" if self.broken_audit_id else "")
        return f"audit chain broken at {where} of {checkpoints.chain_label(self.chain)}: {self.reason}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def entry_problem(entry: AuditEntry, previous_hash: str, receipts: redactions.Receipts) -> str | None:
    """Why this entry breaks the chain after an entry whose hash is `previous_hash`, or None. The
    `redacted` flag is not covered by the HMAC: a redacted entry must prove its erasure (`receipts`)."""
    if entry.prev_hash != previous_hash:
        return "does not link to the previous entry"
    if not hmac.compare_digest(entry.entry_hash, entry_hash(entry)):
        return "its fields were changed"
    try:
        payload = entry.payload
    except Exception as exc:  # undecryptable or malformed payload is a broken entry
        return f"payload unreadable: {exc}"
    if entry.redacted:
        return receipts.problem(entry, payload)
    if not hmac.compare_digest(entry.payload_digest, payload_digest(payload)):
        return "its payload was changed"
    if (entry.batch_id or "") != (payload.get("batch_id") or ""):  # the column the console's ?batch= reads
        return "its batch was changed"
    return None


def sealed(entry: AuditEntry, payload: dict[str, Any]) -> bool:
    """Whether an entry's HMAC and the digest of this, its payload, hold (an erasure receipt's test)."""
    return hmac.compare_digest(entry.entry_hash, entry_hash(entry)) and hmac.compare_digest(
        entry.payload_digest, payload_digest(payload)
    )


def verify_audit_chain(batch: int = 2000) -> ChainReport:
    """Walk every chain and the checkpoints; return OK or the first broken link and why."""
    anchors = checkpoints.replay()  # a broken checkpoint is reported after the entries (a wrong key shows there)
    head_rows = {head.chain: head for head in AuditHead.objects.all()}
    chains = sorted(
        set(AuditEntry.objects.values_list("chain", flat=True).distinct())
        | {chain for chain, head in head_rows.items() if head.seq}
        | set(anchors.last)
    )
    checked, receipts = 0, redactions.Receipts(sealed)
    for chain in chains:
        report = _verify_one(chain, head_rows.get(chain), anchors, receipts, batch)
        if not report.ok:
            return report
        checked += report.checked
    if anchors.problem:
        return ChainReport(False, checked, reason=anchors.problem)
    return ChainReport(True, checked, chains=len(chains), checkpoints=anchors.checkpoints)


def _verify_one(
    chain: str, head: AuditHead | None, anchors: checkpoints.Anchors, receipts: redactions.Receipts, batch: int
) -> ChainReport:
    expected_prev, expected_seq, checked = GENESIS, 1, 0
    anchored = anchors.expected.get(chain, {})
    while True:
        rows = list(AuditEntry.objects.filter(chain=chain, seq__gte=expected_seq).order_by("seq")[:batch])
        if not rows:
            break
        for entry in rows:
            if entry.seq != expected_seq:
                return ChainReport(
                    False, checked, expected_seq, None, f"entry #{expected_seq} is missing (deleted)", chain
                )
            problem = entry_problem(entry, expected_prev, receipts)
            if problem is None and anchored.get(entry.seq, entry.entry_hash) != entry.entry_hash:
                problem = "it is not the entry a checkpoint recorded here"
            if problem:
                return ChainReport(False, checked, entry.seq, entry.audit_id, problem, chain)
            expected_prev = entry.entry_hash
            expected_seq += 1
            checked += 1
    last_seq = expected_seq - 1
    if chain in anchors.last and anchors.last[chain][0] > last_seq:
        reason = f"the chain ends at #{last_seq} but a checkpoint recorded #{anchors.last[chain][0]} (entries deleted)"
        return ChainReport(False, checked, last_seq + 1, None, reason, chain)
    if head is not None and head.seq != last_seq:
        reason = f"the chain ends at #{last_seq} but its head says #{head.seq} (entries deleted)"
        return ChainReport(False, checked, last_seq + 1, None, reason, chain)
    if head is not None and head.seq and head.entry_hash != expected_prev:
        return ChainReport(False, checked, last_seq, None, "the chain head does not match the last entry", chain)
    return ChainReport(True, checked)


def verify_entries(entries: list[AuditEntry]) -> ChainReport:
    """The chains checked around these entries only (one page of the audit screen): each entry's
    HMAC, its payload digest (or its erasure receipt), and its link to the entry just before it."""
    wanted = Q(pk__in=[])
    for entry in entries:
        wanted |= Q(chain=entry.chain, seq=entry.seq - 1)
    previous = {
        (chain, seq): h for chain, seq, h in AuditEntry.objects.filter(wanted).values_list("chain", "seq", "entry_hash")
    }
    checked, receipts = 0, redactions.Receipts(sealed)
    for entry in sorted(entries, key=lambda row: (row.chain, row.seq)):
        before = GENESIS if entry.seq == 1 else previous.get((entry.chain, entry.seq - 1))
        if before is None:
            reason = f"entry #{entry.seq - 1} is missing (deleted)"
            return ChainReport(False, checked, entry.seq - 1, None, reason, entry.chain)
        if problem := entry_problem(entry, before, receipts):
            return ChainReport(False, checked, entry.seq, entry.audit_id, problem, entry.chain)
        checked += 1
    return ChainReport(True, checked)


def redact(entry: AuditEntry, replacement: dict[str, Any]) -> None:
    """Replace an entry's payload (erasure: `redactions.replacement`, naming its receipt). The digest
    of the original stays, so the chain verifies."""
    entry.set_payload(replacement)
    entry.redacted = True
    entry.save(update_fields=["payload_stored", "encrypted", "redacted"])
