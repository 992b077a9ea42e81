"""The audit log as an HMAC hash chain (docs/design.md §6).

Each entry stores the previous entry's hash and an HMAC over its structural fields plus a keyed
digest of its payload. Everything that can carry personal content (summary, before, after,
metadata, sender_name) lives in the payload, so erasure can redact a payload (`redacted=True`,
digest kept) while edits, insertions and deletions of entries are still detected.

Appends are serialised: the chain tip (`AuditHead`, one row) is locked with SELECT ... FOR UPDATE
on PostgreSQL; SQLite transactions are BEGIN IMMEDIATE (settings.py), which takes the database
write lock up front. `append` must run inside the caller's `transaction.atomic()`, so an entry
lands exactly when the change it describes does.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from . import rowstate
from .errors import PermissionDenied
from .models import AuditEntry, AuditHead, canonical_json
from .reports import Report

if TYPE_CHECKING:
    from .scopes import ScopeKeys

GENESIS = "0" * 64
SUMMARY_MAX = 240
# The batch id of the bulk action running in this context (`batch()`), "" outside one.
_BATCH: ContextVar[str] = ContextVar("audit_batch", default="")


@contextmanager
def batch() -> Iterator[str]:
    """Group every entry appended inside the block into one batch (a bulk console action): each
    stores the yielded id in `AuditEntry.batch_id` and in its payload (covered by the chain)."""
    batch_id = uuid.uuid4().hex
    token = _BATCH.set(batch_id)
    try:
        yield batch_id
    finally:
        _BATCH.reset(token)


def current_batch() -> str:
    """The id of the batch being appended (`batch()`), "" outside one."""
    return _BATCH.get()


@dataclass(frozen=True)
class Actor:
    """Who performs an operation: a console user, a bot token or the system.

    `bot_uuids`, when set, limits the actor to those bots; operations refuse any other scope.
    """

    type: str  # user | token | system
    name: str
    bot_uuids: frozenset[str] | None = field(default=None)

    @classmethod
    def system(cls, name: str = "system") -> Actor:
        return cls("system", name)

    @classmethod
    def for_user(cls, user: Any, bot_uuids: frozenset[str] | None = None) -> Actor:
        return cls("user", user.get_username(), bot_uuids)

    @classmethod
    def for_token(cls, token: Any) -> Actor:
        return cls("token", f"token:{token.prefix}:{token.name}", frozenset(token.bot_uuids))

    @property
    def label(self) -> str:
        return f"{self.type}:{self.name}" if self.type != "token" else self.name

    def may_use_bot(self, bot_uuid: str) -> bool:
        """Whether this actor may read or change the memory of bot `bot_uuid`."""
        return self.bot_uuids is None or bot_uuid in self.bot_uuids

    def require_bot(self, keys_or_bot_uuid: ScopeKeys | str) -> None:
        """`PermissionDenied` unless this actor may use the bot (of these scope keys)."""
        bot_uuid = keys_or_bot_uuid if isinstance(keys_or_bot_uuid, str) else keys_or_bot_uuid.bot_uuid
        if not self.may_use_bot(bot_uuid):
            raise PermissionDenied("this actor may not use this bot's memory")


def audit_key() -> bytes:
    key: str | None = settings.MEMCONSOLE_AUDIT_KEY
    if key:
        return key.encode()
    return hmac.new(settings.SECRET_KEY.encode(), b"memconsole-audit-chain-v1", hashlib.sha256).digest()


def key_id() -> str:
    """A public fingerprint of the audit key (`InstallState.audit_key_id`; reveals nothing of it)."""
    return hmac.new(audit_key(), b"memconsole-audit-key-id", hashlib.sha256).hexdigest()[:16]


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
    return canonical_json(fields).encode()


def entry_hash(entry: AuditEntry) -> str:
    return hmac.new(audit_key(), _structural(entry), hashlib.sha256).hexdigest()


def _head_for_update() -> AuditHead:
    head = AuditHead.objects.select_for_update().filter(pk=1).first()
    if head is None:
        AuditHead.objects.get_or_create(pk=1)
        head = AuditHead.objects.select_for_update().get(pk=1)
    return head


def lock_chain() -> None:
    """Lock the chain's head until the end of the caller's `transaction.atomic()`.

    Lock order: remember, archive/restore and delete lock the head *before* the per-user_key
    counters (`EpisodeCounts`), so a transaction that recounts (imports, erasure) must lock the head
    before it recounts too, or the two wait on each other (a deadlock on PostgreSQL).
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit.lock_chain must run inside transaction.atomic()")
    _head_for_update()


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
    summary: str = "",
    before: Any = None,
    after: Any = None,
    metadata: dict[str, Any] | None = None,
    rows: Iterable[Any] = (),
) -> AuditEntry:
    """Append one entry to the chain. Call inside `transaction.atomic()`, after saving the rows
    the entry is about: it records the after-state of every episode and profile sealed or saved in
    the transaction since the previous append (`rowstate`), and of `rows` (rows changed with
    `QuerySet.update()` or `bulk_update()`, which no signal reports: pass them refreshed)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit.append must run inside transaction.atomic()")
    row_states = rowstate.encode(rowstate.digests([*rowstate.take(), *rows], audit_key()))
    payload = {
        "summary": summary[:SUMMARY_MAX],
        "sender_name": sender_name,
        "before": before,
        "after": after,
        "metadata": metadata or {},
    }
    batch_id = current_batch()
    if batch_id:
        payload["batch_id"] = batch_id
    head = _head_for_update()
    entry = AuditEntry(
        seq=head.seq + 1,
        audit_id=uuid.uuid4().hex,
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
    entry.save(force_insert=True)
    head.seq = entry.seq
    head.entry_hash = entry.entry_hash
    head.save(update_fields=["seq", "entry_hash"])
    return entry


@dataclass(frozen=True)
class ChainReport(Report):
    ok: bool
    checked: int
    broken_seq: int | None = None
    broken_audit_id: str | None = None
    reason: str = ""

    def __str__(self) -> str:
        if self.ok:
            return f"audit chain OK ({self.checked} entries)"
        return f"audit chain broken at entry #{self.broken_seq} ({self.broken_audit_id}): {self.reason}"


def entry_problem(entry: AuditEntry, previous_hash: str) -> str | None:
    """Why this entry breaks the chain after an entry whose hash is `previous_hash`, or None."""
    if entry.prev_hash != previous_hash:
        return "does not link to the previous entry"
    if not hmac.compare_digest(entry.entry_hash, entry_hash(entry)):
        return "its fields were changed"
    if not entry.redacted:
        try:
            payload = entry.payload
        except Exception as exc:  # undecryptable or malformed payload is a broken entry
            return f"payload unreadable: {exc}"
        if not hmac.compare_digest(entry.payload_digest, payload_digest(payload)):
            return "its payload was changed"
    return None


def verify_audit_chain(batch: int = 2000) -> ChainReport:
    """Walk the whole chain; return OK or the first broken link and why."""
    expected_prev = GENESIS
    expected_seq = 1
    checked = 0
    last_seq = 0
    while True:
        rows = list(AuditEntry.objects.filter(seq__gte=expected_seq).order_by("seq")[:batch])
        if not rows:
            break
        for entry in rows:
            if entry.seq != expected_seq:
                return ChainReport(False, checked, expected_seq, None, f"entry #{expected_seq} is missing (deleted)")
            if problem := entry_problem(entry, expected_prev):
                return ChainReport(False, checked, entry.seq, entry.audit_id, problem)
            expected_prev = entry.entry_hash
            expected_seq += 1
            last_seq = entry.seq
            checked += 1
    head = AuditHead.objects.filter(pk=1).first()
    if head is not None and head.seq != last_seq:
        return ChainReport(
            False,
            checked,
            last_seq + 1,
            None,
            f"the chain ends at #{last_seq} but its head says #{head.seq} (entries deleted)",
        )
    if head is not None and head.seq and head.entry_hash != expected_prev:
        return ChainReport(False, checked, last_seq, None, "the chain head does not match the last entry")
    return ChainReport(True, checked)


def verify_entries(entries: list[AuditEntry]) -> ChainReport:
    """The chain checked around these entries only (one page of the audit screen): each entry's
    HMAC, its payload digest, and its link to the entry just before it in the whole chain."""
    previous = dict(
        AuditEntry.objects.filter(seq__in={entry.seq - 1 for entry in entries}).values_list("seq", "entry_hash")
    )
    previous[0] = GENESIS
    checked = 0
    for entry in sorted(entries, key=lambda row: row.seq):
        if entry.seq - 1 not in previous:
            return ChainReport(False, checked, entry.seq - 1, None, f"entry #{entry.seq - 1} is missing (deleted)")
        if problem := entry_problem(entry, previous[entry.seq - 1]):
            return ChainReport(False, checked, entry.seq, entry.audit_id, problem)
        checked += 1
    return ChainReport(True, checked)


def redact(entry: AuditEntry, replacement: dict[str, Any]) -> None:
    """Replace an entry's payload (erasure). The digest of the original stays, so the chain verifies."""
    entry.set_payload(replacement)
    entry.redacted = True
    entry.save(update_fields=["payload_stored", "encrypted", "redacted"])
