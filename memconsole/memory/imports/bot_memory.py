"""The `bot-memory` format: an agent-memory `memory.db` (SQLite, tables `facts` and `messages`).

The agent `agent_id == bot_uuid` is imported: its facts into the target session (which must be
given), each as "key: value" tagged `fact` and its key; with `include_messages`, its messages
into the scope of their room, tagged with their role.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from .. import validation
from ..models import STATUS_ACTIVE
from . import fields
from .plan import MAX_RECORDS, EpisodeIn, Plan, Progress, Target
from .readers import open_sqlite, rows, text_of
from .report import ImportFileError

FACT_COLUMNS = {"agent_id", "subject", "key", "value", "updated_at"}
MESSAGE_COLUMNS = {"agent_id", "room_id", "role", "content", "created_at"}
PROGRESS_EVERY = 1000
DEFAULT_IMPORTANCE = 2


def parse(
    path: Path,
    plan: Plan,
    target: Target,
    *,
    bot_uuid: str = "",
    session_name: str | None = None,
    include_messages: bool = False,
    progress: Progress | None = None,
    **_options: Any,
) -> None:
    if not session_name:
        raise ImportFileError(
            "bot-memory facts go into one session: give the target session name", field="session_name"
        )
    tables = {"facts": FACT_COLUMNS}
    if include_messages:
        tables["messages"] = MESSAGE_COLUMNS
    connection = open_sqlite(path, "bot-memory", tables)
    try:
        facts = connection.execute("SELECT COUNT(*) FROM facts WHERE agent_id = ?", (bot_uuid,)).fetchone()[0]
        messages = 0
        if include_messages:
            messages = connection.execute("SELECT COUNT(*) FROM messages WHERE agent_id = ?", (bot_uuid,)).fetchone()[0]
        total = facts + messages
        if total > MAX_RECORDS:
            raise ImportFileError(f"the file holds {total} records for this agent; at most {MAX_RECORDS} per import")
        if total == 0:
            raise ImportFileError(
                f"no facts{' or messages' if include_messages else ''} for agent {bot_uuid!r} in this file"
                f" (agents found: {', '.join(_agents(connection)) or 'none'})",
                field="bot_uuid",
            )
        done = 0
        if facts:
            keys = target(session_name, "facts (the target session name)")
            sql = "SELECT rowid, subject, key, value, updated_at FROM facts WHERE agent_id = ? ORDER BY rowid"
            for rowid, subject, fact_key, value, updated_at in rows(connection, sql, (bot_uuid,)):
                where = f"facts row {rowid}"
                key_text = fields.text(text_of(fact_key, where, "key"), where, "key", 1000, required=True).strip()
                value_text = text_of(value, where, "value") or ""
                # The key also becomes a tag: a tag may hold no comma and at most 64 characters.
                key_tag = re.sub(r"\s+", " ", key_text.replace(",", " ")).strip()[: validation.MAX_TAG_CHARS]
                notes: list[fields.Note] = []
                plan.add_episode(
                    EpisodeIn(
                        keys=keys,
                        where=where,
                        old_id=f"fact:{rowid}",
                        content=fields.content(f"{key_text}: {value_text}", where, "value"),
                        tags=fields.tags(["fact", key_tag], where),
                        importance=DEFAULT_IMPORTANCE,
                        timestamp=fields.episode_time(
                            text_of(updated_at, where, "updated_at"), where, notes, plan.imported_at, "updated_at"
                        ),
                        sender_id=fields.text(
                            text_of(subject, where, "subject"), where, "subject", validation.MAX_SENDER_CHARS
                        ).strip(),
                        sender_name="",
                        status=STATUS_ACTIVE.value,
                        superseded_by="",
                        notes=notes,
                    )
                )
                done += 1
                if progress and done % PROGRESS_EVERY == 0:
                    progress("reading", done, total)
        if messages:
            sql = "SELECT rowid, room_id, role, content, created_at FROM messages WHERE agent_id = ? ORDER BY rowid"
            for rowid, room_id, role, content, created_at in rows(connection, sql, (bot_uuid,)):
                where = f"messages row {rowid}"
                role_text = (text_of(role, where, "role") or "").strip()
                notes = []
                plan.add_episode(
                    EpisodeIn(
                        keys=target(text_of(room_id, where, "room_id"), where),
                        where=where,
                        old_id=f"message:{rowid}",
                        content=fields.content(text_of(content, where, "content"), where),
                        tags=fields.tags([role_text] if role_text else [], where),
                        importance=DEFAULT_IMPORTANCE,
                        timestamp=fields.episode_time(
                            text_of(created_at, where, "created_at"), where, notes, plan.imported_at, "created_at"
                        ),
                        sender_id="",
                        sender_name="",
                        status=STATUS_ACTIVE.value,
                        superseded_by="",
                        notes=notes,
                    )
                )
                done += 1
                if progress and done % PROGRESS_EVERY == 0:
                    progress("reading", done, total)
    finally:
        connection.close()


def _agents(connection: sqlite3.Connection) -> list[str]:
    """Some agent ids the file does hold (for the error that names none of them)."""
    return sorted(
        row[0].decode("utf-8", "replace") if isinstance(row[0], bytes) else str(row[0])
        for row in connection.execute("SELECT DISTINCT agent_id FROM facts LIMIT 20")
    )
