"""Redacted audit entries, each bound to the erasure that redacted it (docs/design.md §6).

A redacted entry keeps the digest of its original payload, which is gone, so neither its `redacted`
flag nor its new payload is covered by its HMAC. A redaction therefore proves itself another way:
its payload is exactly the erasure form, naming the audit id of its erasure's receipt, and that
receipt (an `erase_subject` entry whose HMAC and payload digest hold) lists the entry's audit id.
Entries redacted before receipts listed them (the form without "receipt") verify when an erasure
receipt of that time (one without the list) was written at or after both the entry and its
redaction: a weaker guarantee (§6).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from . import paging
from .models import AuditEntry

RECEIPT_OPERATION = "erase_subject"
# The receipt's metadata key listing the audit ids of the entries its erasure redacted.
LISTED = "redacted_entries"
ERASURE = "erasure"
_FORM = frozenset({"redacted", "redacted_at", "receipt"})
_OLD_FORM = frozenset({"redacted", "redacted_at"})  # written before receipts listed their entries
NO_RECEIPT = "it was redacted without an erasure receipt"


def replacement(receipt_audit_id: str, at: datetime) -> dict[str, str]:
    """The payload of an entry redacted by the erasure whose receipt will be `receipt_audit_id`."""
    return {"redacted": ERASURE, "redacted_at": at.isoformat(), "receipt": receipt_audit_id}


def names_receipt(entry: AuditEntry) -> bool:
    """Whether an entry is already redacted in the form that names a receipt (a later erasure of
    someone else leaves it bound to the first; an entry redacted in the old form is bound anew)."""
    return entry.redacted and "receipt" in entry.payload


@dataclass(frozen=True)
class _Receipt:
    timestamp: datetime
    listed: frozenset[str]


class Receipts:
    """The erasure receipts that vouch for redactions, read once, on the first redacted entry.

    `sealed(entry, payload)` says whether an entry's HMAC and payload digest hold (`audit`): a
    receipt that fails it vouches for nothing (and the chain walk reports it too)."""

    def __init__(self, sealed: Callable[[AuditEntry, dict[str, Any]], bool]) -> None:
        self._sealed = sealed
        self._listing: dict[str, _Receipt] | None = None
        self._last_unlisted: datetime | None = None  # the newest receipt written without a list

    def _load(self) -> dict[str, _Receipt]:
        listing: dict[str, _Receipt] = {}
        receipts = AuditEntry.objects.filter(operation=RECEIPT_OPERATION, redacted=False)
        for receipt in paging.iter_in_batches(receipts, 500):
            try:
                payload = receipt.payload
            except Exception:  # unreadable: vouches for nothing; the chain walk says why
                continue
            if not self._sealed(receipt, payload):
                continue
            listed = (payload.get("metadata") or {}).get(LISTED)
            if isinstance(listed, list):
                listing[receipt.audit_id] = _Receipt(receipt.timestamp, frozenset(map(str, listed)))
            elif self._last_unlisted is None or receipt.timestamp > self._last_unlisted:
                self._last_unlisted = receipt.timestamp
        return listing

    def problem(self, entry: AuditEntry, payload: Any) -> str | None:
        """Why a redacted entry with this payload is not an erasure's redaction, or None."""
        if not isinstance(payload, dict) or payload.get("redacted") != ERASURE:
            return "its payload was changed (not an erasure's redaction)"
        keys = frozenset(payload)
        at = _aware(payload.get("redacted_at"))
        if keys not in (_FORM, _OLD_FORM) or at is None:
            return "its payload was changed (not an erasure's redaction)"
        if self._listing is None:
            self._listing = self._load()
        if keys == _FORM:
            receipt = self._listing.get(str(payload["receipt"]))
            if receipt is None or entry.audit_id not in receipt.listed or at > receipt.timestamp:
                return NO_RECEIPT
            return None
        last = self._last_unlisted
        if last is None or at > last or entry.timestamp > last:
            return NO_RECEIPT
        return None


def _aware(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo is not None else None
