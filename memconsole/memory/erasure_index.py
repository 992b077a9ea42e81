"""The vector-index part of an erasure, journaled so that a killed run is finished by the next one.

`erasure.erase_subject` commits the database part together with an `ErasureJournal` row listing
the collections (by user_key) that held the person and the vector ids to delete; `purge` then,
for each listed collection: records which rows it marks not current, deletes the vectors, rebuilds
the collection (a copy of the remaining vectors, its HNSW files' unused capacity scrubbed), marks
the rows current again and crosses the collection off. After the last one, embedded Chroma's log
rows of dropped collections are deleted, the index compacted, and nothing of the person may be
left (their sender id in any log or metadata row of the bot's collections, their vector ids
anywhere, the sender id in the rebuilt HNSW files): only then is the journal finished.

A run killed anywhere leaves the row unfinished: the health check reports it (ERROR) and running
the same erasure again, or `manage.py erase_subject --resume` (no sender id needed: the journal
holds the ids), calls `purge` again, which starts at the first collection not crossed off.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from memconsole.lib import vectorpurge, vectors

from .erasure_journal import ErasureJournal
from .models import Episode
from .scopes import RESERVED_BOT_UUID
from .sync import mark_current, mark_not_current

log = logging.getLogger("memconsole.memory")

Progress = Callable[[str], None]
RESUME_COMMAND = "python manage.py erase_subject --resume"


def quiet(message: str) -> None:
    """The default `Progress`: says nothing."""


def in_bot(user_key: str, bot_uuid: str) -> bool:
    """Whether a collection's user_key belongs to one bot ('' = every bot). A `global` scope is
    shared by every bot: a bot-limited erasure reaches it only through the ids it found in SQL."""
    return not bot_uuid or user_key == f"{RESERVED_BOT_UUID}:{bot_uuid}" or user_key.startswith(f"{bot_uuid}:")


def vectors_of(sender_id: str, bot_uuid: str) -> tuple[set[str], set[str]]:
    """(user_keys, vector ids) the index holds of a person beyond their database rows: live vectors
    carrying their sender id (any client), and collections whose embedded log or metadata still
    mentions them (a deleted vector's add stays in Chroma's log). Within `bot_uuid`'s collections;
    nothing when the index cannot be read now (the collections of their rows are still purged)."""
    user_keys: set[str] = set()
    ids: set[str] = set()
    try:
        for user_key, found in vectorpurge.ids_where({"sender_id": sender_id}).items():
            if in_bot(user_key, bot_uuid):
                user_keys.add(user_key)
                ids.update(found)
        mentioning = vectorpurge.collections_mentioning({"sender_id": sender_id}, [])
    except (vectors.VectorIndexError, OSError, sqlite3.Error):
        log.exception("erasure: the vector index could not be searched for the person's leftovers")
        return set(), set()
    return user_keys | {uk for uk in mentioning if in_bot(uk, bot_uuid)}, ids


def open_journal(
    subject_digest: str, bot_uuid: str, user_keys: Iterable[str], vector_ids: Iterable[str], receipt_audit_id: str
) -> ErasureJournal:
    """Inside the erasure's transaction: this subject's unfinished journal, created or extended."""
    journal = (
        ErasureJournal.objects.select_for_update()
        .filter(subject_digest=subject_digest, bot_uuid=bot_uuid, finished_at__isnull=True)
        .first()
    ) or ErasureJournal(subject_digest=subject_digest, bot_uuid=bot_uuid)
    journal.user_keys = sorted(set(journal.user_keys) | set(user_keys))
    journal.vector_ids = sorted(set(journal.vector_ids) | set(vector_ids))
    journal.receipt_audit_id = receipt_audit_id or journal.receipt_audit_id
    journal.save()
    return journal


def unfinished_for(subject_digest: str, bot_uuid: str) -> ErasureJournal | None:
    return ErasureJournal.objects.filter(
        subject_digest=subject_digest, bot_uuid=bot_uuid, finished_at__isnull=True
    ).first()


def unfinished() -> list[ErasureJournal]:
    """Every erasure whose vector-index part is not finished, oldest first."""
    return list(ErasureJournal.objects.filter(finished_at__isnull=True).order_by("started_at", "pk"))


def _needles(sender_id: str | None) -> list[bytes]:
    if not sender_id:
        return []
    return [sender_id.encode("utf-8"), json.dumps(sender_id).strip('"').encode("ascii")]


def _save(journal: ErasureJournal, *fields: str) -> None:
    journal.save(update_fields=list(fields))


def purge(journal: ErasureJournal, *, sender_id: str | None = None, progress: Progress = quiet) -> dict[str, Any]:
    """Finish a journal's vector-index part (see the module docstring); with the sender id (a rerun
    of the same erasure) the last check also looks for it. Returns `{"ok": True, "compacted", ...}`
    or `{"ok": False, "error"}`, and the count of collections rebuilt as `rebuilt`."""
    ids = set(journal.vector_ids)
    rebuilt: list[str] = []
    try:
        total = len(journal.user_keys)
        for position, user_key in enumerate(list(journal.user_keys), start=1):
            progress(f"vector index: rebuilding collection {position} of {total}")
            current = Episode.objects.in_scope(user_key).filter(vector_current=True).values_list("pk", flat=True)
            journal.marked[user_key] = sorted(set(journal.marked.get(user_key, [])) | set(current))
            _save(journal, "marked")
            mark_not_current(user_key)
            present = [i for i in vectors.all_ids(user_key) if i in ids]
            if present:
                vectors.delete(user_key, present)
            vectorpurge.rebuild_collection(user_key)
            mark_current(user_key, journal.marked.pop(user_key))
            journal.user_keys = [uk for uk in journal.user_keys if uk != user_key]
            _save(journal, "user_keys", "marked")
            rebuilt.append(user_key)
            progress(f"vector index: rebuilt collection {position} of {total}")
        orphan_rows = vectorpurge.purge_orphan_log()
        compacted = (
            vectors.compact_storage()
            if rebuilt or orphan_rows
            else {"compacted": False, "reason": "nothing to compact"}
        )
        left = _traces(journal, sender_id, rebuilt)
    except (vectors.VectorIndexError, OSError, sqlite3.Error) as exc:
        # sqlite3.Error: embedded Chroma's own database file, e.g. "database is locked" while compacting.
        log.exception("erasure: the vector index was not fully purged")
        error = f"{type(exc).__name__}: {exc}"
        journal.last_error = error[:2000]
        _save(journal, "last_error")
        return {"ok": False, "error": error, "rebuilt": len(rebuilt)}
    if left:
        error = "the vector index still holds the person: " + "; ".join(left)
        journal.last_error = error[:2000]
        _save(journal, "last_error")
        return {"ok": False, "error": error, "rebuilt": len(rebuilt)}
    finish(journal)
    return {"ok": True, **compacted, "orphan_log_rows": orphan_rows, "rebuilt": len(rebuilt)}


def _traces(journal: ErasureJournal, sender_id: str | None, rebuilt: list[str]) -> list[str]:
    metadata = {"sender_id": sender_id} if sender_id else {}
    mentioning = set(vectorpurge.collections_mentioning({}, sorted(journal.vector_ids)))
    if metadata:
        mentioning |= {uk for uk in vectorpurge.collections_mentioning(metadata, []) if in_bot(uk, journal.bot_uuid)}
    left = [f"the collection of {uk} (its log or metadata)" for uk in sorted(mentioning)]
    return left + vectorpurge.hnsw_files_holding(rebuilt, _needles(sender_id))


def finish(journal: ErasureJournal) -> None:
    """Mark a journal finished and empty its lists (nothing of the person remains in the row)."""
    with transaction.atomic():
        journal.finished_at = timezone.now()
        journal.user_keys, journal.vector_ids, journal.marked, journal.last_error = [], [], {}, ""
        journal.save()


def resume_unfinished(progress: Progress = quiet) -> list[tuple[ErasureJournal, dict[str, Any]]]:
    """Finish every unfinished erasure (`manage.py erase_subject --resume`); (journal, result) each."""
    results = []
    for journal in unfinished():
        progress(f"resuming the erasure {journal.subject_digest[:12]} started {journal.started_at:%Y-%m-%d %H:%M}")
        results.append((journal, purge(journal, progress=progress)))
    return results


def compact_database() -> dict[str, Any]:
    """Make deleted rows' bytes leave the database file (SQLite: VACUUM and truncate the WAL)."""
    if connection.vendor != "sqlite":
        return {
            "compacted": False,
            "reason": f"{connection.vendor}: run VACUUM FULL on the memory tables to rewrite their files",
        }
    if connection.in_atomic_block:
        return {"compacted": False, "reason": "inside a transaction"}
    try:
        with connection.cursor() as cursor:
            cursor.execute("VACUUM")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            busy = cursor.fetchone()[0]
    except Exception as exc:  # a busy database: erasure is done, compaction can be repeated
        log.exception("erasure: VACUUM failed")
        return {"compacted": False, "reason": str(exc)}
    return {"compacted": not busy, "reason": "" if not busy else "the WAL is in use by another connection"}
