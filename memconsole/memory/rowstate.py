"""A memory row's identity and state, as the sealed format and the audit chain bind them
(docs/design.md §6).

- `identity(row)`: what a sealed value of the row is bound to (`IDENTITY`; crypto's format 2). A
  value copied into another row, or a row whose identity fields were changed, no longer opens.
- `state(row)`: the after-state of an episode or profile (`CHAINED`), of which the audit chain
  records a keyed digest (`AuditEntry.row_states`); `tamper` compares every row with it.
- `note(row)` / `take()`: the episodes and profiles sealed (`install.seal`) or saved (`post_save`,
  `connect`) in the current transaction, which the next `audit.append` records. A note made inside
  a transaction or savepoint that was rolled back is dropped: each carries a marker callback
  registered with `transaction.on_commit`, and Django discards the callbacks of a rolled-back
  block. A note still pending when its transaction commits was changed without an audit entry
  after the change: that is logged (and the health check reports the row).

This module imports no model (models.py imports it through `install`): it reads rows by name.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
from collections.abc import Callable, Iterable
from datetime import UTC
from typing import Any

from django.db import models, transaction
from django.db.models.signals import post_save

log = logging.getLogger("memconsole.memory")

IDENTITY: dict[str, tuple[str, ...]] = {
    "Episode": ("episode", "episode_id", "user_key"),
    "Profile": ("profile", "scope_key", "type", "sender_id"),
    "ProfileVersion": ("profile_version", "profile_id", "version"),
    "AuditEntry": ("audit", "audit_id"),
    "InjectionSnapshot": ("snapshot", "snapshot_id", "user_key"),
    # Issue 20 (H8): an episode's metadata row, keyed facts and their history, window messages.
    "EpisodeMetadata": ("episode_metadata", "episode_id"),
    "Fact": ("fact", "user_key", "subject", "key"),
    "FactVersion": ("fact_version", "fact_id", "version"),
    "WindowMessage": ("window_message", "scope_key", "user_key"),
}

# The rows whose after-state the chain records: their sealed column and the fields of their state.
EPISODE_FIELDS = (
    "episode_id",
    "user_key",
    "scope_key",
    "bot_uuid",
    "tags",
    "importance",
    "timestamp",
    "status",
    "superseded_by",
    "sender_id",
    "sender_name",
    "source",
    "query_id",
    "imported_episode_id",
    "original_source",
)
PROFILE_FIELDS = ("scope_key", "type", "sender_id", "version")
CHAINED: dict[str, tuple[str, tuple[str, ...]]] = {
    "Episode": ("content_stored", EPISODE_FIELDS),
    "Profile": ("payload_stored", PROFILE_FIELDS),
}
# State format 2 adds these fields (format 1, recorded before it, has none: an episode's `kind`,
# which the console filters and bulk-selects by, was not covered). A digest of format 2 is recorded
# as "2:<hex>"; a row whose last recorded digest is of format 1 is checked in format 1 until its
# next change records it again (design.md §6).
ADDED_IN_2: dict[str, tuple[str, ...]] = {"Episode": ("kind",), "Profile": ()}
FORMAT_2 = "2:"
# What a state check loads of each row (nothing else is read); `tags_text` is checked against `tags`.
LOADED: dict[str, tuple[str, ...]] = {
    name: ("pk", column, "encrypted", *fields, *ADDED_IN_2[name], *(("tags_text",) if name == "Episode" else ()))
    for name, (column, fields) in CHAINED.items()
}
DIGEST_CHARS = 32  # 128 bits of HMAC-SHA256
_STATE_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)

_local = threading.local()
_PLAIN = "_memconsole_sealed_plain"  # instance cache: (stored value, its plaintext), set by `remember_plain`


def identity(row: models.Model) -> list[str | int] | None:
    """The identity `row`'s sealed values are bound to (None for a model without one)."""
    spec = IDENTITY.get(type(row).__name__)
    if spec is None:
        return None
    values = [getattr(row, name) for name in spec[1:]]
    missing = [name for name, value in zip(spec[1:], values, strict=True) if value is None]
    if missing:
        raise ValueError(f"a {spec[0]} row is sealed before its identity is set ({', '.join(missing)})")
    return [spec[0], *values]


def is_chained(row: Any) -> bool:
    return type(row).__name__ in CHAINED


def ref(row: Any) -> str:
    """The row's name in `AuditEntry.row_states`: "e:<episode_id>" or "p:<profile pk>" (no personal data)."""
    return f"e:{row.episode_id}" if type(row).__name__ == "Episode" else f"p:{row.pk}"


def remember_plain(row: Any, stored: str, plain: str) -> None:
    """Cache the plaintext of a value just sealed, so that recording its state decrypts nothing."""
    row.__dict__[_PLAIN] = (stored, plain)


def sealed_plain(row: Any) -> str:
    """The row's sealed column as plain text (checking the identity it is sealed for)."""
    column = CHAINED[type(row).__name__][0]
    stored = getattr(row, column)
    cached = row.__dict__.get(_PLAIN)
    if cached is not None and cached[0] == stored:
        return str(cached[1])
    return str(row.opened())  # `install.Sealed`


def state(row: Any, form: int = 2) -> list[Any]:
    """The after-state of an episode or profile the chain records: its fields and its sealed text
    (`form` 1: without the fields added in format 2)."""
    name = type(row).__name__
    fields = CHAINED[name][1] + (ADDED_IN_2[name] if form == 2 else ())
    values: list[Any] = [name]
    for name in fields:
        value = getattr(row, name)
        values.append(
            value.astimezone(UTC).isoformat(timespec="microseconds") if hasattr(value, "astimezone") else value
        )
    values.append(sealed_plain(row))
    return values


def digest(row: Any, key: bytes, form: int = 2) -> str:
    """Keyed digest of `state(row, form)` as recorded: "2:<hex>" in format 2, "<hex>" in format 1
    (raises `crypto.DecryptionError` for a row that does not open)."""
    data = _STATE_JSON.encode(state(row, form))
    if form == 1:
        return hmac.new(key, b"row:" + data.encode("utf-8"), hashlib.sha256).hexdigest()[:DIGEST_CHARS]
    return FORMAT_2 + hmac.new(key, b"row2:" + data.encode("utf-8"), hashlib.sha256).hexdigest()[:DIGEST_CHARS]


def digest_like(row: Any, key: bytes, recorded: str) -> str:
    """The row's digest in the format of `recorded` (the digest the chain last recorded for it)."""
    return digest(row, key, 2 if recorded.startswith(FORMAT_2) else 1)


def digests(rows: Iterable[Any], key: bytes) -> dict[str, str]:
    """{ref: digest} of the saved episodes and profiles among `rows` (the last copy of each wins)."""
    out: dict[str, str] = {}
    for row in rows:
        if is_chained(row) and row.pk is not None:
            out[ref(row)] = digest(row, key)
    return out


def encode(states: dict[str, str]) -> str:
    return json.dumps(states, sort_keys=True, separators=(",", ":")) if states else ""


def decode(text: str) -> dict[str, str]:
    if not text:
        return {}
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("row_states is not an object")
    return {str(k): str(v) for k, v in data.items()}


# --- the rows changed in this transaction ------------------------------------------------------


def _pending() -> dict[tuple[str, Any], tuple[Any, Callable[[], None]]]:
    pending: dict[tuple[str, Any], tuple[Any, Callable[[], None]]] | None = getattr(_local, "pending", None)
    if pending is None:
        pending = _local.pending = {}
    return pending


def note(row: Any) -> None:
    """Note an episode or profile changed in this transaction, for the next audit entry (others: nothing)."""
    if not is_chained(row):
        return
    if not transaction.get_connection().in_atomic_block:
        return  # an autocommit write has no audit entry to go with it
    pending = _pending()
    name = type(row).__name__
    slot = (name, row.episode_id if name == "Episode" else id(row) if row.pk is None else row.pk)

    def committed() -> None:
        entry = pending.get(slot)
        if entry is not None and entry[1] is committed:
            del pending[slot]
            log.error("%s %s was changed without an audit entry after the change", name, slot[1])

    transaction.on_commit(committed)
    pending[slot] = (row, committed)


def live_callbacks() -> set[int]:
    """The ids of the on_commit callbacks still registered: a marker callback whose block rolled back is gone."""
    return {id(callback) for _sids, callback, _robust in transaction.get_connection().run_on_commit}


def take() -> list[Any]:
    """The rows noted in the live transaction since the last `take` (then forgotten)."""
    pending = _pending()
    if not pending:
        return []
    live = live_callbacks()
    rows = [row for row, marker in pending.values() if id(marker) in live]
    pending.clear()
    return rows


def _saved(sender: type[models.Model], instance: models.Model, raw: bool = False, **kwargs: Any) -> None:
    if not raw:
        note(instance)


def connect() -> None:
    """Note every episode/profile `save()` (called from `MemoryConfig.ready`)."""
    post_save.connect(_saved, dispatch_uid="memconsole-row-state")
