"""Keyed facts (issue 20, the bot-memory plan): remember(subject, key, value), recall, forget.

One fact per (space, subject, key): the space is the scope's `user_key` (a chat's own under session
isolation, the bot's under bot isolation), so facts never leave it. Remembering a key again keeps
the earlier value as a `FactVersion`; forgetting deletes the fact and its history. Every change is
audited in the same transaction (the entry's `sender_id` is the subject, so erasing a person redacts
it). A fact whose subject is a speaker's `sender_id` shows on that speaker's profile and is injected
with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext_noop

from . import audit, locks
from .audit import Actor
from .botmemory_models import MAX_FACT_KEY_CHARS, MAX_SUBJECT_CHARS, Fact, FactVersion, WindowMessage
from .errors import NotFound
from .scopes import ScopeKeys, register_scope
from .validation import text, validate_identifier
from .wording import said

MAX_VALUE_CHARS = 2000
MAX_FACTS_LISTED = 500


@dataclass(frozen=True)
class FactView:
    subject: str
    key: str
    value: str
    version: int
    updated_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "key": self.key,
            "value": self.value,
            "version": self.version,
            "updated_at": self.updated_at.isoformat(),
        }


def _view(fact: Fact) -> FactView:
    return FactView(fact.subject, fact.key, fact.text, fact.version, fact.updated_at)


def _subject(value: Any) -> str:
    return validate_identifier(value, "subject", MAX_SUBJECT_CHARS)


def _key(value: Any) -> str:
    return validate_identifier(value, "key", MAX_FACT_KEY_CHARS)


def _lock_name(keys: ScopeKeys, subject: str, key: str) -> str:
    return f"fact:{keys.user_key}\x1f{subject}\x1f{key}"


def target_id(subject: str, key: str) -> str:
    """The audit target of a fact (its subject and key; the value stays in the sealed payload)."""
    return f"{subject}\x1f{key}"[:255]


def remember_fact(
    keys: ScopeKeys, actor: Actor, subject: Any, key: Any, value: Any, *, updated_at: datetime | None = None
) -> FactView:
    """Upsert the fact (subject, key) of this space; the value it replaces is kept as a version."""
    actor.require_bot(keys)
    subject, key = _subject(subject), _key(key)
    value = text(value, "value", MAX_VALUE_CHARS, required=True, trim=True)
    now = updated_at or timezone.now()
    with transaction.atomic():
        locks.hold(_lock_name(keys, subject, key))  # two first writes would both insert it
        register_scope(keys)
        fact = Fact.objects.select_for_update().filter(user_key=keys.user_key, subject=subject, key=key).first()
        before = None
        if fact is None:
            fact = Fact(
                user_key=keys.user_key,
                scope_key=keys.scope_key,
                bot_uuid=keys.bot_uuid,
                subject=subject,
                key=key,
                created_at=now,
            )
        else:
            before = fact.text
            if before == value:
                return _view(fact)
            old = FactVersion(fact=fact, version=fact.version, created_at=fact.updated_at, actor=actor.label)
            old.set_text(before)
            old.save()
            fact.version += 1
            fact.scope_key = keys.scope_key
        fact.updated_at = now
        fact.set_text(value)
        fact.save()
        audit.append(
            "fact_remember",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            sender_id=subject,
            target_type="fact",
            target_id=target_id(subject, key),
            summary=said(gettext_noop("fact %(key)s of %(subject)s: %(value)s"), key=key, subject=subject, value=value),
            before={"value": before} if before is not None else None,
            after={"subject": subject, "key": key, "value": value, "version": fact.version},
        )
    return _view(fact)


def recall_facts(keys: ScopeKeys, subject: Any, key: Any = None) -> list[FactView]:
    """The current facts of `subject` in this space (one, when `key` is given), by key."""
    subject = _subject(subject)
    rows = Fact.objects.filter(user_key=keys.user_key, subject=subject)
    if key is not None and key != "":
        rows = rows.filter(key=_key(key))
    return [_view(fact) for fact in rows.order_by("key")[:MAX_FACTS_LISTED]]


def forget_fact(keys: ScopeKeys, actor: Actor, subject: Any, key: Any) -> None:
    """Delete one fact and its history; `NotFound` when this space has no such fact."""
    actor.require_bot(keys)
    subject, key = _subject(subject), _key(key)
    with transaction.atomic():
        locks.hold(_lock_name(keys, subject, key))  # as remember_fact: one writer of it at a time
        fact = Fact.objects.select_for_update().filter(user_key=keys.user_key, subject=subject, key=key).first()
        if fact is None:
            raise NotFound("no such fact in this scope")
        value = fact.text
        fact.delete()
        audit.append(
            "fact_forget",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            sender_id=subject,
            target_type="fact",
            target_id=target_id(subject, key),
            summary=said(gettext_noop("forgot fact %(key)s of %(subject)s"), key=key, subject=subject),
            before={"subject": subject, "key": key, "value": value},
        )


def speaker_facts(user_key: str, sender_id: str) -> list[FactView]:
    """The facts about one speaker in a space (their profile page and injection)."""
    if not sender_id:
        return []
    rows = Fact.objects.filter(user_key=user_key, subject=sender_id).order_by("key")
    return [_view(fact) for fact in rows[:MAX_FACTS_LISTED]]


def space_facts(user_key: str) -> list[FactView]:
    """Every fact of a space, by subject and key (its export)."""
    return [_view(fact) for fact in Fact.objects.filter(user_key=user_key).order_by("subject", "key")]


def _of_person(sender_id: str, bot_uuid: str) -> tuple[QuerySet[Fact], QuerySet[WindowMessage]]:
    """The facts about one person and the window messages they sent (of one bot, when given)."""
    about = Fact.objects.filter(subject=sender_id)
    sent = WindowMessage.objects.filter(sender_id=sender_id)
    if bot_uuid:
        about, sent = about.filter(bot_uuid=bot_uuid), sent.filter(bot_uuid=bot_uuid)
    return about, sent


def erase_person(sender_id: str, bot_uuid: str, *, dry_run: bool) -> tuple[int, int]:
    """(facts, window messages) about or from one person (of one bot, when given): deleted, or with
    `dry_run` only counted. The erasure (erasure.py) calls it in its transaction; the facts' audit
    entries carry the subject as `sender_id`, so erasure redacts them with the rest."""
    about, sent = _of_person(sender_id, bot_uuid)
    counts = about.count(), sent.count()
    if not dry_run:
        about.delete()  # their history (FactVersion) goes with them
        sent.delete()
    return counts


def spaces_of_person(sender_id: str, bot_uuid: str) -> set[str]:
    """The spaces (user_key) of one person's facts and the chats (scope_key) of their window
    messages, of one bot when given: what their erasure counts as memory spaces with these."""
    about, sent = _of_person(sender_id, bot_uuid)
    return {*about.values_list("user_key", flat=True), *sent.values_list("scope_key", flat=True)}


def export_records(user_key: str) -> list[dict[str, Any]]:
    """A space's facts as the scope export writes them (`exports.py`; `imports` reads them back)."""
    return [fact.as_dict() for fact in space_facts(user_key)]


def import_facts(items: list[Any], actor: Actor) -> int:
    """Write imported facts (`imports.plan.FactIn`) inside the import's transaction: a new (subject,
    key) is created, a different value becomes the fact's new version (the old one kept), the same
    value is left alone. Returns how many were written."""
    written = 0
    for item in items:
        fact = Fact.objects.filter(user_key=item.keys.user_key, subject=item.subject, key=item.key).first()
        when = item.updated_at or timezone.now()
        if fact is None:
            fact = Fact(
                user_key=item.keys.user_key,
                scope_key=item.keys.scope_key,
                bot_uuid=item.keys.bot_uuid,
                subject=item.subject,
                key=item.key,
                created_at=when,
            )
        else:
            if fact.text == item.value:
                continue
            old = FactVersion(fact=fact, version=fact.version, created_at=fact.updated_at, actor=actor.label)
            old.set_text(fact.text)
            old.save()
            fact.version += 1
        fact.updated_at = when
        fact.set_text(item.value)
        fact.save()
        written += 1
    return written
