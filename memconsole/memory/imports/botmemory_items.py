"""Imported keyed facts and window messages (issue 20): the plan's `FactIn` / `MessageIn` records,
how a file's record becomes one (the `memconsole` export's `facts` / `messages`, bot-memory's
`facts` / `messages` tables), and what of them an import writes (`tally`). `writer` hands them to
`facts.import_facts` / `window.import_messages`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.translation import gettext_noop

from .. import window
from ..botmemory_models import MAX_FACT_KEY_CHARS, MAX_SUBJECT_CHARS, Fact
from ..facts import MAX_VALUE_CHARS
from ..scopes import ScopeKeys
from ..validation import MAX_SENDER_CHARS
from ..window import ROLES
from ..wording import said
from . import fields
from .report import ImportFileError, ImportReport

# Why an imported message is not stored (`window.sort_imported`; one already in its chat is not listed).
NOT_KEPT = {
    window.FUTURE: gettext_noop("dated in the future; not stored (a live write refuses it too)"),
    window.PAST_RETENTION: gettext_noop(
        "older than the conversation window keeps messages (MEMCONSOLE_WINDOW_RETENTION_DAYS); not stored"
    ),
    window.WINDOW_FULL: gettext_noop("older than every message its chat's window keeps (the window size); not stored"),
}


@dataclass(slots=True)
class FactIn:
    keys: ScopeKeys
    where: str
    subject: str
    key: str
    value: str
    updated_at: datetime | None


@dataclass(slots=True)
class MessageIn:
    keys: ScopeKeys
    where: str
    role: str
    content: str
    created_at: datetime
    sender_id: str = ""
    sender_name: str = ""


def fact_in(keys: ScopeKeys, where: str, subject: Any, key: Any, value: Any, updated_at: Any) -> FactIn:
    return FactIn(
        keys=keys,
        where=where,
        subject=fields.identifier(subject, where, "subject", MAX_SUBJECT_CHARS, required=True),
        key=fields.identifier(key, where, "key", MAX_FACT_KEY_CHARS, required=True),
        value=fields.text(value, where, "value", MAX_VALUE_CHARS, required=True, trim=True),
        updated_at=fields.time(updated_at, where, "updated_at"),
    )


def message_in(
    keys: ScopeKeys,
    where: str,
    role: Any,
    content: Any,
    created_at: Any,
    imported_at: datetime,
    sender_id: Any = "",
    sender_name: Any = "",
) -> MessageIn:
    role_text = fields.text(role, where, "role", 32, required=True, trim=True).lower()
    if role_text not in ROLES:
        raise fields.fail(where, "role", gettext_noop("must be one of %(roles)s"), roles=", ".join(ROLES))
    return MessageIn(
        keys=keys,
        where=where,
        role=role_text,
        content=fields.content(content, where),
        created_at=fields.time(created_at, where, "created_at") or imported_at,
        sender_id=fields.identifier(sender_id, where, "sender_id", MAX_SENDER_CHARS),
        sender_name=fields.identifier(sender_name, where, "sender_name", MAX_SENDER_CHARS),
    )


def records(doc: dict[str, Any], name: str) -> list[Any]:
    """A `memconsole` export's `facts` or `messages` list ([] when absent)."""
    value = doc.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ImportFileError(said(fields.NOT_A_LIST, place="", name=name), field=name)
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise ImportFileError(
                said(gettext_noop("%(name)s[%(index)s]: must be an object"), name=name, index=index), field=name
            )
    return value


def tally(facts: list[FactIn], messages: list[MessageIn], report: ImportReport) -> None:
    """Count in `report` the facts and window messages the import writes (a dry run: would write),
    and list as a conflict each message the window does not keep. Reads only; the writer counts
    again what it wrote."""
    for keys in [*(fact.keys for fact in facts), *(message.keys for message in messages)]:
        report.scope(keys)
    report.facts = _facts_written(facts)
    kept, dropped = window.sort_imported(messages)
    for message, why in dropped:
        if why in NOT_KEPT:
            report.conflict(message.keys, why, message.where, NOT_KEPT[why])
    report.messages = len(kept)


def _facts_written(items: list[FactIn]) -> int:
    """How many of `items` `facts.import_facts` writes: a new (subject, key), or another value."""
    values: dict[tuple[str, str, str], str | None] = {}
    written = 0
    for item in items:
        at = (item.keys.user_key, item.subject, item.key)
        if at not in values:
            fact = Fact.objects.filter(user_key=item.keys.user_key, subject=item.subject, key=item.key).first()
            values[at] = fact.text if fact else None
        if values[at] != item.value:
            values[at] = item.value
            written += 1
    return written
