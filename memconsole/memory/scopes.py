"""Scope derivation (docs/design.md §2, LangBot rules). One function derives every key."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.utils import timezone
from django.utils.translation import gettext_noop

from .errors import ValidationError
from .models import ISOLATION_BOT, ISOLATION_SESSION, Scope
from .wording import said

MAX_SESSION_NAME = 255
MAX_BOT_UUID = 128
RESERVED_BOT_UUID = "bot"
TOO_LONG = gettext_noop("%(name)s is longer than %(max)s characters")
GLOBAL_USER_KEY = "global"
# The health probe's own bot: its scopes are swept and deleted by the probe, so no token, import or
# console user may write there; only the probe, inside `unregistered_scopes()`.
HEALTH_PROBE_BOT_UUID = "memconsole-health-probe"
# Every user_key of the probe's scopes starts with this (session isolation): reindex and the health
# check skip them, the probe sweeps them.
PROBE_USER_KEY_PREFIX = HEALTH_PROBE_BOT_UUID + ":"

_registration_suspended: ContextVar[bool] = ContextVar("memconsole_scope_registration_suspended", default=False)


@dataclass(frozen=True)
class ScopeKeys:
    bot_uuid: str
    session_name: str
    isolation: str
    launcher_type: str
    launcher_id: str
    scope_key: str  # = session_key
    user_key: str

    @property
    def session_key(self) -> str:
        return self.scope_key


def _printable(value: str) -> bool:
    return value.isprintable()


def derive_scope(
    bot_uuid: str | None, session_name: str | None, isolation: str | None = ISOLATION_SESSION
) -> ScopeKeys:
    """Derive session_key (scope_key) and user_key from bot, session and isolation mode.

    Spaces around the session name are trimmed, so `"group_1001 "` is the space `group_1001`, not a
    look-alike of it (other whitespace, such as a newline or a tab, is non-printable and refused).
    Raises `ValidationError` for an empty or malformed session name, bot UUID or isolation.
    """
    if not isinstance(session_name, str) or not session_name.strip():
        raise ValidationError(said(gettext_noop("session_name is required")), field="session_name")
    if len(session_name) > MAX_SESSION_NAME:
        raise ValidationError(said(TOO_LONG, name="session_name", max=MAX_SESSION_NAME), field="session_name")
    if not _printable(session_name):
        raise ValidationError(
            said(gettext_noop("session_name contains non-printable characters")), field="session_name"
        )
    session_name = session_name.strip()  # only spaces: every other whitespace is non-printable
    if bot_uuid is None:
        bot_uuid = ""
    if not isinstance(bot_uuid, str):
        raise ValidationError(said(gettext_noop("bot_uuid must be a string")), field="bot_uuid")
    bot_uuid = bot_uuid.strip()
    if len(bot_uuid) > MAX_BOT_UUID:
        raise ValidationError(said(TOO_LONG, name="bot_uuid", max=MAX_BOT_UUID), field="bot_uuid")
    if bot_uuid and (not _printable(bot_uuid) or ":" in bot_uuid or " " in bot_uuid):
        raise ValidationError(
            said(gettext_noop("bot_uuid may not contain ':', spaces or non-printable characters")), field="bot_uuid"
        )
    if isolation in (None, ""):
        isolation = ISOLATION_SESSION
    if isolation not in (ISOLATION_SESSION, ISOLATION_BOT):
        raise ValidationError(said(gettext_noop("isolation must be 'session' or 'bot'")), field="isolation")
    # Keys are plain strings, so refuse the few inputs whose keys would equal another scope's.
    if bot_uuid == RESERVED_BOT_UUID:
        raise ValidationError(
            said(gettext_noop("bot_uuid 'bot' is reserved (bot-isolation keys start with 'bot:')")), field="bot_uuid"
        )
    if bot_uuid.lower() == HEALTH_PROBE_BOT_UUID and not _registration_suspended.get():
        # Case-insensitive: SQLite's LIKE, behind the probe's startswith sweeps, ignores ASCII case.
        raise ValidationError(
            said(gettext_noop("bot_uuid %(bot)s is reserved for the health check"), bot=repr(HEALTH_PROBE_BOT_UUID)),
            field="bot_uuid",
        )
    if not bot_uuid and ":" in session_name:
        raise ValidationError(
            said(
                gettext_noop(
                    "session_name may not contain ':' when there is no bot_uuid (it would read as '<bot_uuid>:<session>')"
                )
            ),
            field="session_name",
        )
    if not bot_uuid and isolation == ISOLATION_SESSION and session_name == GLOBAL_USER_KEY:
        raise ValidationError(
            said(
                gettext_noop("session_name %(name)s without a bot_uuid is reserved for bot isolation"),
                name=repr(GLOBAL_USER_KEY),
            ),
            field="session_name",
        )

    launcher_type, _, launcher_id = session_name.partition("_")
    scope_key = f"{bot_uuid}:{session_name}" if bot_uuid else session_name
    if isolation == ISOLATION_SESSION:
        user_key = scope_key
    else:
        user_key = f"{RESERVED_BOT_UUID}:{bot_uuid}" if bot_uuid else GLOBAL_USER_KEY
    return ScopeKeys(bot_uuid, session_name, isolation, launcher_type, launcher_id, scope_key, user_key)


@contextmanager
def unregistered_scopes() -> Iterator[None]:
    """Operations run inside record no Scope rows (the health probe's synthetic canary scopes,
    which must never be listed as data). Per thread/context: other requests are unaffected."""
    token = _registration_suspended.set(True)
    try:
        yield
    finally:
        _registration_suspended.reset(token)


def register_scope(keys: ScopeKeys) -> Scope:
    """Record (or touch) the scope so the console can list it (see `unregistered_scopes`)."""
    now = timezone.now()
    if _registration_suspended.get():
        return Scope(
            scope_key=keys.scope_key,
            isolation=keys.isolation,
            user_key=keys.user_key,
            bot_uuid=keys.bot_uuid,
            session_name=keys.session_name,
            first_seen=now,
            last_seen=now,
        )
    scope, created = Scope.objects.get_or_create(
        scope_key=keys.scope_key,
        isolation=keys.isolation,
        defaults={
            "user_key": keys.user_key,
            "bot_uuid": keys.bot_uuid,
            "session_name": keys.session_name,
            "first_seen": now,
            "last_seen": now,
        },
    )
    if not created and (now - scope.last_seen).total_seconds() > 60:
        Scope.objects.filter(pk=scope.pk).update(last_seen=now)
        scope.last_seen = now
    return scope


def keys_of(scope: Scope) -> ScopeKeys:
    return derive_scope(scope.bot_uuid, scope.session_name, scope.isolation)
