"""The `bot-memory` format: an agent-memory `memory.db` (SQLite, tables `facts` and `messages`).

The agent `agent_id == bot_uuid` is imported: its facts into the target session's space (which must
be given) as keyed facts (subject, key, value: `facts.py`, issue 20); with `include_messages`, its
messages into the conversation window of their room (`window.py`), each cut to the bot's window.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from django.utils.translation import gettext_noop

from ..wording import said
from .botmemory_items import fact_in, message_in
from .plan import MAX_RECORDS, Plan, Progress, Target
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
            said(gettext_noop("bot-memory facts go into one session: give the target session name")),
            field="session_name",
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
            raise ImportFileError(
                said(
                    gettext_noop("the file holds %(total)s records for this agent; at most %(max)s per import"),
                    total=total,
                    max=MAX_RECORDS,
                )
            )
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
                plan.facts.append(
                    fact_in(
                        keys,
                        where,
                        text_of(subject, where, "subject"),
                        text_of(fact_key, where, "key"),
                        text_of(value, where, "value"),
                        text_of(updated_at, where, "updated_at"),
                    )
                )
                done += 1
                if progress and done % PROGRESS_EVERY == 0:
                    progress("reading", done, total)
        if messages:
            sql = "SELECT rowid, room_id, role, content, created_at FROM messages WHERE agent_id = ? ORDER BY rowid"
            for rowid, room_id, role, content, created_at in rows(connection, sql, (bot_uuid,)):
                where = f"messages row {rowid}"
                plan.messages.append(
                    message_in(
                        target(text_of(room_id, where, "room_id"), where),
                        where,
                        text_of(role, where, "role"),
                        text_of(content, where, "content"),
                        text_of(created_at, where, "created_at"),
                        plan.imported_at,
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
