"""Memory spaces as the console opens and tidies them: opening one never creates an empty row,
and an empty one can be removed (both audited). Apart from `scopes.py` because `audit` names
`scopes.ScopeKeys`: key derivation stays below the audit chain, these operations above it."""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext_noop

from . import audit
from .audit import Actor
from .errors import NotFound, ValidationError
from .models import Episode, EpisodeCounts, InjectionSnapshot, Profile, Scope
from .scopes import ScopeKeys, keys_of, register_scope
from .wording import said


def holds_memory(keys: ScopeKeys) -> bool:
    """Whether anything is stored for these keys: an episode of its memory (shared by a bot's chats
    under bot isolation), or a profile or injection snapshot of this chat."""
    return (
        Episode.objects.in_scope(keys.user_key).exists()
        or Profile.objects.filter(scope_key=keys.scope_key).exists()
        or InjectionSnapshot.objects.filter(scope_key=keys.scope_key, isolation=keys.isolation).exists()
    )


def open_scope(keys: ScopeKeys, actor: Actor) -> Scope | None:
    """The Scope row to open for these keys, never an empty one: the registered row, or (the
    first time a chat is opened whose memory already holds something, e.g. a new chat of a bot
    under bot isolation) a new row, audited as `scope_open`. None for a space with nothing stored:
    it gets its row with its first memory (`editing.add_episode`, a profile, an import)."""
    actor.require_bot(keys)
    scope = Scope.objects.filter(scope_key=keys.scope_key, isolation=keys.isolation).first()
    if scope is not None or not holds_memory(keys):
        return scope
    with transaction.atomic():
        scope = register_scope(keys)
        audit.append(
            "scope_open",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            target_type="scope",
            target_id=str(scope.pk),
            summary=said(gettext_noop("memory space opened in the console")),
            after={"bot_uuid": keys.bot_uuid, "session_name": keys.session_name, "isolation": keys.isolation},
        )
    return scope


def remove_empty_scope(scope: Scope, actor: Actor) -> None:
    """Remove a space's row when nothing is stored in it (audited as `scope_remove`); its audit
    entries stay. Raises `ValidationError` while it holds anything."""
    keys = keys_of(scope)
    actor.require_bot(keys)
    with transaction.atomic():
        audit.lock_chain(keys.scope_key)
        row = Scope.objects.select_for_update().filter(pk=scope.pk).first()
        if row is None:
            raise NotFound("no such memory space")
        if holds_memory(keys):
            raise ValidationError(
                said(gettext_noop("this memory space is not empty: only an empty space can be removed")), field="scope"
            )
        audit.append(
            "scope_remove",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            target_type="scope",
            target_id=str(row.pk),
            summary=said(gettext_noop("empty memory space removed")),
            before={"bot_uuid": keys.bot_uuid, "session_name": keys.session_name, "isolation": keys.isolation},
        )
        row.delete()
        if not Scope.objects.filter(user_key=keys.user_key).exists():
            EpisodeCounts.objects.filter(user_key=keys.user_key).delete()
