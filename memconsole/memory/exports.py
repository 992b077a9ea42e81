"""Scope exports (docs/design.md §7).

A scope export is one JSON document that combines the LangBot-compatible envelopes:

    {"format": "memconsole-scope-export", "format_version": 1, "memconsole_version": "...",
     "exported_at": "...Z", "scope": {bot_uuid, session_name, isolation, scope_key, user_key},
     "profiles": {version: 1, exported_at, scope_key, user_key, profiles[{type, scope_key,
                  sender_id?, profile{name, traits[], preferences[], notes, updated_at}, version}], count},
     "episodes": {version: 1, exported_at, scope_key, user_key, statuses, episodes[...], count},
     "audit":    {version: 1, exported_at, scope_key, user_key, entries[...], count}}   (optional)

Each envelope puts `count` after its list, so the document can be written as it is read: rows are
fetched by keyset batches and yielded as text chunks, and memory stays flat whatever the size.
Content is decrypted.

Auditing: the export's audit entry is written when `stream_scope_export` is *called*, in its own
transaction, before the first byte is produced, with the counts the export will contain (rows are
bounded by the highest primary key seen at that moment, so rows added while streaming are left
out). Writing it at the end would leave an abandoned download unaudited although part of the data
has already left; writing it first records every export that was started. Permission and
validation errors are raised by the call itself, not on first iteration, so a view can answer 4xx.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, overload

from django.db import transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext_noop

import memconsole

from . import audit, facts, queries, window
from .audit import Actor
from .errors import unavailable_on_failure
from .models import PROFILE_SPEAKER, STATUS_ACTIVE, STATUSES, AuditEntry, Episode, Profile
from .paging import iter_in_batches
from .scopes import ScopeKeys
from .validation import validate_statuses
from .wording import said

FORMAT_MARKER = "memconsole-scope-export"
AUDIT_FORMAT_MARKER = "memconsole-audit-export"
FORMAT_VERSION = 1
ENVELOPE_VERSION = 1
BATCH = 500


@overload
def iso(value: datetime) -> str: ...
@overload
def iso(value: None) -> None: ...
@overload
def iso(value: datetime | None) -> str | None: ...


def iso(value: datetime | None) -> str | None:
    """ISO-8601 in UTC with a trailing Z (LangBot's form); microseconds kept when present."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def export_filename(keys: ScopeKeys) -> str:
    """A safe download file name: no path separators, quotes or control characters."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", keys.scope_key).strip("._") or "scope"
    stamp = timezone.now().astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"memconsole-{slug[:80]}-{keys.isolation}-{stamp}.json"


# --- row serialisers ----------------------------------------------------------------------------


def episode_record(episode: Episode) -> dict[str, Any]:
    """LangBot's read fields (+ imported_episode_id, original_source, query_id, kind and metadata when
    set; read `metadata` of many rows through a `prefetch_related("metadata_row")` queryset)."""
    record: dict[str, Any] = {
        "id": episode.episode_id,
        "content": episode.content,
        "tags": list(episode.tags),
        "importance": episode.importance,
        "timestamp": iso(episode.timestamp),
        "sender_id": episode.sender_id,
        "sender_name": episode.sender_name,
        "source": episode.source,
        "status": episode.effective_status,
        "superseded_by": episode.superseded_by,
    }
    if episode.imported_episode_id:
        record["imported_episode_id"] = episode.imported_episode_id
    if episode.original_source:
        record["original_source"] = episode.original_source
    if episode.query_id:
        record["query_id"] = episode.query_id
    if episode.kind:
        record["kind"] = episode.kind
    metadata = episode.metadata
    if metadata:
        record["metadata"] = metadata
    return record


def profile_record(profile: Profile) -> dict[str, Any]:
    data = profile.payload
    record: dict[str, Any] = {"type": profile.type, "scope_key": profile.scope_key}
    if profile.type == PROFILE_SPEAKER:
        record["sender_id"] = profile.sender_id
    record["profile"] = {
        "name": data.get("name", ""),
        "traits": list(data.get("traits", [])),
        "preferences": list(data.get("preferences", [])),
        "notes": data.get("notes", ""),
        "updated_at": iso(profile.updated_at),
    }
    record["version"] = profile.version
    return record


def audit_record(entry: AuditEntry) -> dict[str, Any]:
    payload = entry.payload
    return {
        "audit_id": entry.audit_id,
        "chain": entry.chain,
        "seq": entry.seq,
        "timestamp": iso(entry.timestamp),
        "operation": entry.operation,
        "scope_key": entry.scope_key,
        "user_key": entry.user_key,
        "actor_type": entry.actor_type,
        "actor": entry.actor,
        "sender_id": entry.sender_id,
        "sender_name": payload.get("sender_name", ""),
        "target_type": entry.target_type,
        "target_id": entry.target_id,
        "query_id": entry.query_id,
        "summary": payload.get("summary", ""),
        "before": payload.get("before"),
        "after": payload.get("after"),
        "metadata": payload.get("metadata", {}),
        "redacted": entry.redacted,
        "prev_hash": entry.prev_hash,
        "entry_hash": entry.entry_hash,
    }


# --- querysets ----------------------------------------------------------------------------------


def _episodes(keys: ScopeKeys, statuses: list[str]) -> QuerySet[Episode]:
    rows = Episode.objects.in_scope(keys.user_key)
    if set(statuses) != set(STATUSES):
        # "missing or unknown reads as active": an unknown stored status goes with active.
        where = Q(status__in=statuses)
        if STATUS_ACTIVE in statuses:
            where |= ~Q(status__in=STATUSES)
        rows = rows.filter(where)
    return rows.prefetch_related("metadata_row")


def _profiles(keys: ScopeKeys) -> QuerySet[Profile]:
    return Profile.objects.filter(scope_key=keys.scope_key)


def _audit_entries(keys: ScopeKeys) -> QuerySet[AuditEntry]:
    # The chat's own entries (its scope_key), not those of the bot's other chats that share its
    # user_key under bot isolation.
    return queries.scope_audit_entries(keys)


def _bounded(queryset: QuerySet[Any]) -> tuple[Any, int]:
    """(queryset limited to rows that exist now, their count)."""
    top = queryset.aggregate(top=Max("pk"))["top"] or 0
    bounded = queryset.filter(pk__lte=top)
    return bounded, bounded.count() if top else 0


# --- streaming ----------------------------------------------------------------------------------


class ExportStream(Iterator[str]):
    """The export's text chunks, plus the counts its audit entry recorded (`counts`)."""

    def __init__(self, chunks: Iterator[str], counts: dict[str, int], audit_id: str) -> None:
        self._chunks = chunks
        self.counts = counts
        self.audit_id = audit_id

    def __iter__(self) -> ExportStream:
        return self

    def __next__(self) -> str:
        with unavailable_on_failure():  # a row no configured key opens
            return next(self._chunks)

    def close(self) -> None:
        # StreamingHttpResponse closes what it streams; close the generator (and its cursor) too.
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()


def _envelope(head: dict[str, Any], list_name: str, records: Iterable[dict[str, Any]]) -> Iterator[str]:
    """Stream `{...head, list_name: [records], count}`, one chunk per batch of records."""
    opening = _dump(head)
    yield opening[:-1] + ("," if head else "") + _dump(list_name) + ":["
    count = 0
    chunk: list[str] = []
    for record in records:
        chunk.append(("," if count else "") + _dump(record))
        count += 1
        if len(chunk) >= BATCH:
            yield "".join(chunk)
            chunk = []
    if chunk:
        yield "".join(chunk)
    yield "]," + _dump("count") + ":" + str(count) + "}"


def _head(keys: ScopeKeys, exported_at: str, **extra: Any) -> dict[str, Any]:
    return {
        "version": ENVELOPE_VERSION,
        "exported_at": exported_at,
        "scope_key": keys.scope_key,
        "user_key": keys.user_key,
        **extra,
    }


def stream_scope_export(
    keys: ScopeKeys, actor: Actor, *, statuses: list[str] | None = None, include_audit: bool = False
) -> ExportStream:
    """JSON text chunks of one scope export document, in constant memory.

    `statuses=None` exports every status. Audited when called (see the module docstring); raises
    `PermissionDenied` / `ValidationError` immediately.
    """
    actor.require_bot(keys)
    statuses = list(STATUSES) if statuses is None else validate_statuses(statuses)
    episodes, episode_count = _bounded(_episodes(keys, statuses))
    profiles, profile_count = _bounded(_profiles(keys))
    now = timezone.now()
    with transaction.atomic():
        # Lock the space's chain first so the audit count below is exact: the export's own entry
        # is the last one it covers.
        audit.lock_chain(keys.scope_key)
        audit_count = _audit_entries(keys).count() + 1 if include_audit else 0
        entry = audit.append(
            "export",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            target_type="scope",
            target_id=keys.scope_key,
            summary=said(
                gettext_noop("exported %(episodes)s episodes and %(profiles)s profiles and %(audit)s audit entries")
                if include_audit
                else gettext_noop("exported %(episodes)s episodes and %(profiles)s profiles"),
                episodes=episode_count,
                profiles=profile_count,
                audit=audit_count,
            ),
            metadata={
                "statuses": statuses,
                "episodes": episode_count,
                "profiles": profile_count,
                "include_audit": include_audit,
                "audit_entries": audit_count,
            },
        )
    entries = _audit_entries(keys).filter(pk__lte=entry.pk) if include_audit else None
    counts = {"profiles": profile_count, "episodes": episode_count, "audit_entries": audit_count}
    return ExportStream(_scope_document(keys, now, statuses, profiles, episodes, entries), counts, entry.audit_id)


def _scope_document(
    keys: ScopeKeys,
    now: datetime,
    statuses: list[str],
    profiles: QuerySet[Profile],
    episodes: QuerySet[Episode],
    entries: QuerySet[AuditEntry] | None,
) -> Iterator[str]:
    exported_at = iso(now)
    head = {
        "format": FORMAT_MARKER,
        "format_version": FORMAT_VERSION,
        "memconsole_version": memconsole.__version__,
        "exported_at": exported_at,
        "scope": {
            "bot_uuid": keys.bot_uuid,
            "session_name": keys.session_name,
            "isolation": keys.isolation,
            "scope_key": keys.scope_key,
            "user_key": keys.user_key,
        },
    }
    yield _dump(head)[:-1] + ',"profiles":'
    yield from _envelope(_head(keys, exported_at), "profiles", map(profile_record, iter_in_batches(profiles, BATCH)))
    yield ',"episodes":'
    yield from _envelope(
        _head(keys, exported_at, statuses=statuses),
        "episodes",
        map(episode_record, iter_in_batches(episodes, BATCH)),
    )
    yield ',"facts":' + _dump(facts.export_records(keys.user_key))  # issue 20: the space's keyed facts
    yield ',"messages":' + _dump(window.export_records(keys.scope_key))  # and the chat's window
    if entries is not None:
        yield ',"audit":'
        yield from _envelope(_head(keys, exported_at), "entries", map(audit_record, iter_in_batches(entries, BATCH)))
    yield "}\n"


def stream_audit_export(keys: ScopeKeys, actor: Actor) -> Iterator[str]:
    """JSON text chunks of the scope's audit envelope `{version: 1, ..., entries[], count}`
    (with a `format` marker). Audited when called, like `stream_scope_export`."""
    actor.require_bot(keys)
    now = timezone.now()
    with transaction.atomic():
        audit.lock_chain(keys.scope_key)
        count = _audit_entries(keys).count() + 1
        entry = audit.append(
            "audit_export",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            target_type="scope",
            target_id=keys.scope_key,
            summary=said(gettext_noop("exported %(count)s audit entries"), count=count),
            metadata={"audit_entries": count},
        )
    stream = _audit_document(keys, now, _audit_entries(keys).filter(pk__lte=entry.pk))
    return ExportStream(stream, {"audit_entries": count}, entry.audit_id)


def _audit_document(keys: ScopeKeys, now: datetime, entries: QuerySet[AuditEntry]) -> Iterator[str]:
    exported_at = iso(now)
    head = {"format": AUDIT_FORMAT_MARKER, "memconsole_version": memconsole.__version__, **_head(keys, exported_at)}
    yield from _envelope(head, "entries", map(audit_record, iter_in_batches(entries, BATCH)))
    yield "\n"
