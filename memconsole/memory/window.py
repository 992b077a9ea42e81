"""The conversation window (issue 20, the bot-memory plan): a chat's last N messages.

A message (`role`, `content`, time, optionally its sender) is appended to its chat's window (the
`scope_key`: a window never spans chats, whatever the isolation) and the oldest beyond the bot's
window size (`BotMemorySettings.window_size`, default 20: the plan's `max_context_messages`) drop
out in the same transaction, as do messages older than MEMCONSOLE_WINDOW_RETENTION_DAYS (0 keeps
them). Contents are sealed. Appending is not audited per message (it is a conversation log, like
the snapshots); changing the window size is. An import takes the messages a live append would
(`sort_imported`) and says which it left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet, Subquery
from django.utils import timezone
from django.utils.translation import gettext_noop

from . import audit
from .audit import Actor
from .botmemory_models import DEFAULT_WINDOW_SIZE, MAX_ROLE_CHARS, BotMemorySettings, WindowMessage
from .errors import ValidationError
from .paging import chunks
from .scopes import MAX_BOT_UUID, ScopeKeys, derive_scope, register_scope
from .validation import CLOCK_SKEW, max_content_chars, text, validate_datetime, validate_speaker
from .wording import said

MAX_WINDOW_SIZE = 200
ROLES = ("user", "assistant", "system", "tool")
LOOKUP_BATCH = 500
# Why a message is not kept (`time_refusal`, `sort_imported`).
FUTURE, PAST_RETENTION, WINDOW_FULL, IN_CHAT = "future", "past_retention", "window_full", "in_chat"


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    created_at: datetime
    sender_id: str
    sender_name: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "content": self.content,
            "created_at": self.created_at.isoformat(),
            "sender_id": self.sender_id,
            "sender_name": self.sender_name,
        }


def _message(row: WindowMessage) -> Message:
    return Message(row.role, row.text, row.created_at, row.sender_id, row.sender_name)


def window_size(bot_uuid: str) -> int:
    """How many messages a chat of this bot keeps (the bot's setting, else the default)."""
    size = BotMemorySettings.objects.filter(bot_uuid=bot_uuid).values_list("window_size", flat=True).first()
    return size if size is not None else DEFAULT_WINDOW_SIZE


def validate_window_size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WINDOW_SIZE:
        raise ValidationError(f"the window size must be a whole number from 1 to {MAX_WINDOW_SIZE}", field="limit")
    return value


def set_window_size(actor: Actor, bot_uuid: Any, size: Any) -> int:
    """Set a bot's window size (audited); each chat's window is cut to it at its next message."""
    bot_uuid = text(bot_uuid, "bot_uuid", MAX_BOT_UUID, required=True, trim=True)
    bot_uuid = derive_scope(bot_uuid, "window").bot_uuid  # a bot_uuid as every face takes it
    actor.require_bot(bot_uuid)
    new_size: int = validate_window_size(size)
    with transaction.atomic():
        before = window_size(bot_uuid)
        BotMemorySettings.objects.update_or_create(
            bot_uuid=bot_uuid, defaults={"window_size": new_size, "updated_at": timezone.now()}
        )
        audit.append(
            "window_size",
            actor,
            target_type="bot",
            target_id=bot_uuid,
            summary=said(
                gettext_noop("conversation window of %(bot)s: %(before)s → %(size)s messages"),
                bot=bot_uuid,
                before=before,
                size=new_size,
            ),
            before={"window_size": before},
            after={"window_size": new_size},
        )
    return new_size


def append_message(
    keys: ScopeKeys,
    actor: Actor,
    role: Any,
    content: Any,
    *,
    sender_id: Any = "",
    sender_name: Any = "",
    created_at: Any = None,
) -> Message:
    """Append one message to the chat's window and drop what falls out of it."""
    actor.require_bot(keys)
    role = text(role, "role", MAX_ROLE_CHARS, required=True, trim=True).lower()
    if role not in ROLES:
        raise ValidationError(f"role must be one of {', '.join(ROLES)}", field="role")
    content = text(content, "content", max_content_chars(), required=True)
    sender_id = validate_speaker(sender_id)
    sender_name = validate_speaker(sender_name, "sender_name")
    when = _message_time(created_at)
    with transaction.atomic():
        register_scope(keys)
        size = window_size(keys.bot_uuid)
        newest = WindowMessage.objects.filter(scope_key=keys.scope_key).order_by("-created_at", "-id")
        last_kept = newest.values_list("created_at", flat=True)[size - 1 : size].first()
        if not created_at:
            when = timezone.now()  # a message of now is the newest, whatever was written beside it
        elif last_kept is not None and when < last_kept:  # it would be dropped as it is written
            raise ValidationError(
                f"created_at is older than every message the window keeps (its {size} newest)", field="created_at"
            )
        row = WindowMessage(
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            bot_uuid=keys.bot_uuid,
            role=role,
            sender_id=sender_id,
            sender_name=sender_name,
            created_at=when,
        )
        row.set_text(content)
        row.save()
        trim(keys.scope_key, size)
    return _message(row)


def _message_time(created_at: Any) -> datetime:
    """A new message's time: now by default, and one `time_refusal` accepts."""
    now = timezone.now()
    when = validate_datetime(created_at, "created_at") or now
    refusal = time_refusal(when, now)
    if refusal == FUTURE:
        raise ValidationError("created_at is in the future", field="created_at")
    if refusal == PAST_RETENTION:
        days = settings.MEMCONSOLE_WINDOW_RETENTION_DAYS
        raise ValidationError(f"created_at is older than the window keeps messages ({days} days)", field="created_at")
    return when


def time_refusal(when: datetime, now: datetime) -> str:
    """Why a message of `when` may not enter a window ("" when it may): FUTURE (it would stay the
    newest for good and push every real message out), PAST_RETENTION (it would be dropped as it is
    kept). A live append refuses such a message; an import skips it (`sort_imported`)."""
    if when > now + CLOCK_SKEW:
        return FUTURE
    days = settings.MEMCONSOLE_WINDOW_RETENTION_DAYS
    if days and when < now - timedelta(days=days):
        return PAST_RETENTION
    return ""


def trim(scope_key: str, size: int) -> int:
    """Drop a chat's messages beyond the newest `size` and those past retention; how many went."""
    in_chat = WindowMessage.objects.filter(scope_key=scope_key)
    # One statement, so what it keeps and what it deletes are read from one snapshot: in two (the
    # newest read, then the rest deleted), a message committed by a writer beside it in between
    # was deleted as "not among the newest" although it was the newest of all (PostgreSQL).
    newest = in_chat.order_by("-created_at", "-id").values("pk")[:size]
    dropped, _ = in_chat.exclude(pk__in=Subquery(newest)).delete()
    days = settings.MEMCONSOLE_WINDOW_RETENTION_DAYS
    if days:
        gone, _ = in_chat.filter(created_at__lt=timezone.now() - timedelta(days=days)).delete()
        dropped += gone
    return dropped


def recent_messages(keys: ScopeKeys, limit: Any = None) -> list[Message]:
    """The chat's last `limit` messages (the whole window by default), oldest first as a prompt's
    history reads."""
    size = window_size(keys.bot_uuid)
    limit = size if limit is None else validate_window_size(limit)
    rows = list(_kept(keys.scope_key).order_by("-created_at", "-id")[: min(limit, size)])
    return [_message(row) for row in reversed(rows)]


def _kept(scope_key: str) -> QuerySet[WindowMessage]:
    """A chat's messages within retention: one past it is never served, even before the next
    message of an idle chat drops it (`trim`)."""
    rows = WindowMessage.objects.filter(scope_key=scope_key)
    days = settings.MEMCONSOLE_WINDOW_RETENTION_DAYS
    return rows.filter(created_at__gte=timezone.now() - timedelta(days=days)) if days else rows


def chat_messages(scope_key: str, limit: int = MAX_WINDOW_SIZE) -> list[Message]:
    """A chat's window as the console shows it (newest last)."""
    rows = list(_kept(scope_key).order_by("-created_at", "-id")[:limit])
    return [_message(row) for row in reversed(rows)]


def export_records(scope_key: str) -> list[dict[str, Any]]:
    """A chat's window as the scope export writes it (oldest first)."""
    return [message.as_dict() for message in chat_messages(scope_key)]


def sort_imported(items: list[Any]) -> tuple[list[Any], list[tuple[Any, str]]]:
    """(the imported messages, `imports.plan.MessageIn`, that their chats' windows keep, in file
    order; the others, each with why: FUTURE or PAST_RETENTION (`time_refusal`), WINDOW_FULL (older
    than the newest messages its chat keeps, with the file's others: it would be dropped as it is
    written), IN_CHAT (already in its chat, or earlier in the file: same role, sender and time)).
    Reads only: a dry run says what the real run writes."""
    now = timezone.now()
    dropped: list[tuple[Any, str]] = []
    seen: dict[str, set[tuple[str, str, datetime]]] = {}  # {scope_key: (role, sender, time) there}
    by_chat: dict[str, list[Any]] = {}
    for item in items:
        refusal = time_refusal(item.created_at, now)
        scope_key = item.keys.scope_key
        if scope_key not in seen:
            there = WindowMessage.objects.filter(scope_key=scope_key)
            seen[scope_key] = set(there.values_list("role", "sender_id", "created_at"))
        same = (item.role, item.sender_id, item.created_at)
        if not refusal and same in seen[scope_key]:
            refusal = IN_CHAT
        if refusal:
            dropped.append((item, refusal))
            continue
        seen[scope_key].add(same)
        by_chat.setdefault(scope_key, []).append(item)
    kept: set[int] = set()
    for scope_key, chat in by_chat.items():
        size = window_size(chat[0].keys.bot_uuid)
        newest = _kept(scope_key).order_by("-created_at", "-id").values_list("created_at", "id")[:size]
        # A chat's order is (time, id), and a message written now gets a larger id than any there.
        ranked = [(when, 0, pk, None) for when, pk in newest]
        ranked += [(item.created_at, 1, place, item) for place, item in enumerate(chat)]
        ranked.sort(key=lambda rank: rank[:3], reverse=True)
        kept.update(id(rank[3]) for rank in ranked[:size] if rank[3] is not None)
        dropped += [(item, WINDOW_FULL) for item in chat if id(item) not in kept]
    place = {id(item): index for index, item in enumerate(items)}
    return [item for item in items if id(item) in kept], sorted(dropped, key=lambda drop: place[id(drop[0])])


def import_messages(items: list[Any]) -> dict[str, int]:
    """Write the imported messages their chats' windows keep (`sort_imported`) inside the import's
    transaction, then cut each chat to its bot's window; {scope_key: how many of them it keeps}."""
    rows: list[WindowMessage] = []
    for item in sort_imported(items)[0]:
        row = WindowMessage(
            scope_key=item.keys.scope_key,
            user_key=item.keys.user_key,
            bot_uuid=item.keys.bot_uuid,
            role=item.role,
            sender_id=item.sender_id,
            sender_name=item.sender_name,
            created_at=item.created_at,
        )
        row.set_text(item.content)
        row.save()
        rows.append(row)
    for scope_key, bot_uuid in {row.scope_key: row.bot_uuid for row in rows}.items():
        trim(scope_key, window_size(bot_uuid))
    written: dict[str, int] = {}
    for batch in chunks([row.pk for row in rows], LOOKUP_BATCH):  # what the cut left of them
        for scope_key in WindowMessage.objects.filter(pk__in=batch).values_list("scope_key", flat=True):
            written[scope_key] = written.get(scope_key, 0) + 1
    return written
