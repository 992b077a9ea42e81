"""The `jw-agents` format: a jw-agents `memory.db` (SQLite, table `records`).

Each `session_id` becomes its own scope (a target session name is not used), each record an
episode tagged with its kind and its metadata's tags, its `kind` and `metadata` also kept as the
episode's own (issue 20). `encrypted=1` rows are opened with the
given Fernet key (or JW_MEMORY_KEY); without one, a file with encrypted rows is refused.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_noop

from memconsole.lib import crypto

from .. import validation
from ..wording import said
from . import fields
from .plan import MAX_RECORDS, EpisodeIn, Plan, Progress, Target
from .readers import open_sqlite, reject_constant, rows, text_of
from .report import ImportFileError

COLUMNS = {"id", "session_id", "timestamp", "kind", "content", "metadata", "encrypted"}
PROGRESS_EVERY = 1000


def _decrypt(token: Any, key: str, where: str, name: str) -> str:
    try:
        return crypto.decrypt_with_key(token, key)
    except ImproperlyConfigured as exc:
        raise ImportFileError(f"--fernet-key / JW_MEMORY_KEY: {exc}", field="fernet_key") from None
    except crypto.DecryptionError:
        raise fields.fail(where, name, gettext_noop("cannot be decrypted with the given Fernet key")) from None


def _metadata(value: Any, where: str, key: str | None, encrypted: bool) -> dict[str, Any]:
    text = text_of(value, where, "metadata")
    if not text or not text.strip():
        return {}
    if encrypted and text.startswith("gAAAA") and key:
        text = _decrypt(text, key, where, "metadata")
    try:
        data = json.loads(text, parse_constant=reject_constant)
    except (ValueError, RecursionError):
        raise fields.fail(where, "metadata", gettext_noop("is not valid JSON")) from None
    if not isinstance(data, dict):
        raise fields.fail(where, "metadata", gettext_noop("must be a JSON object"))
    return data


def parse(
    path: Path,
    plan: Plan,
    target: Target,
    *,
    fernet_key: str | None = None,
    progress: Progress | None = None,
    **_options: Any,
) -> None:
    key = fernet_key or os.environ.get("JW_MEMORY_KEY") or None
    connection = open_sqlite(path, "jw-agents", {"records": COLUMNS})
    try:
        total = connection.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        if total > MAX_RECORDS:
            raise ImportFileError(
                said(
                    gettext_noop("the file holds %(total)s records; at most %(max)s per import"),
                    total=total,
                    max=MAX_RECORDS,
                )
            )
        if not key:
            row = connection.execute("SELECT id FROM records WHERE encrypted = 1 ORDER BY id LIMIT 1").fetchone()
            if row is not None:
                raise ImportFileError(
                    said(
                        gettext_noop(
                            "records id=%(id)s is encrypted: give the Fernet key (--fernet-key or JW_MEMORY_KEY); "
                            "nothing was imported"
                        ),
                        id=row[0],
                    ),
                    field="fernet_key",
                )
        sql = "SELECT id, session_id, timestamp, kind, content, metadata, encrypted FROM records ORDER BY id"
        for done, record in enumerate(rows(connection, sql), 1):
            plan.add_episode(_episode(record, target, key, plan.imported_at))
            if progress and done % PROGRESS_EVERY == 0:
                progress("reading", done, total)
    finally:
        connection.close()


def _episode(record: tuple[Any, ...], target: Target, key: str | None, imported_at: datetime) -> EpisodeIn:
    row_id, session_id, stamp, kind, content, metadata, encrypted = record
    where = f"records id={row_id}"
    encrypted = bool(encrypted)
    keys = target(text_of(session_id, where, "session_id"), where)
    kind_text = (text_of(kind, where, "kind") or "").strip()
    content_text = _decrypt(content, key or "", where, "content") if encrypted else text_of(content, where, "content")
    meta = _metadata(metadata, where, key, encrypted)
    tags = fields.tags([kind_text] if kind_text else [], where)
    for tag in fields.tags(meta.get("tags"), where + " metadata"):
        if tag not in tags:
            tags.append(tag)
    fields.check_tag_count(tags, where)
    notes: list[fields.Note] = []
    return EpisodeIn(
        keys=keys,
        where=where,
        old_id=str(row_id),
        content=fields.content(content_text, where),
        tags=tags,
        importance=fields.importance(meta.get("importance"), where + " metadata", notes),
        timestamp=fields.episode_time(text_of(stamp, where, "timestamp"), where, notes, imported_at),
        sender_id=fields.text(
            meta.get("sender_id", meta.get("user_id")), where, "metadata.sender_id", validation.MAX_SENDER_CHARS
        ).strip(),
        sender_name=fields.text(
            meta.get("sender_name"), where, "metadata.sender_name", validation.MAX_SENDER_CHARS
        ).strip(),
        status=fields.status(meta.get("status"), where + " metadata", notes),
        superseded_by="",
        original_source=fields.source(meta.get("source"), where + " metadata"),
        notes=notes,
        kind=fields.kind(kind_text, where, notes),
        metadata=fields.metadata(meta, where),
    )
