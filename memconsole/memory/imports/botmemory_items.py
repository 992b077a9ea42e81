"""Imported keyed facts and window messages (issue 20): the plan's `FactIn` / `MessageIn` records and
how a file's record becomes one (the `memconsole` export's `facts` / `messages`, bot-memory's
`facts` / `messages` tables). `writer` hands them to `facts.import_facts` / `window.import_messages`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.translation import gettext_noop

from ..botmemory_models import MAX_FACT_KEY_CHARS, MAX_SUBJECT_CHARS
from ..facts import MAX_VALUE_CHARS
from ..scopes import ScopeKeys
from ..validation import MAX_SENDER_CHARS
from ..window import ROLES
from ..wording import said
from . import fields
from .report import ImportFileError


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
