"""Bot API tokens (docs/design.md §6): the secret is shown once, only its SHA-256 is stored.

A token reads `mct_<prefix>_<secret>`. The prefix (8 hex characters) is stored in the clear so
that lists and the audit log can name a token without revealing it; the whole string is hashed.
A token carries the bot_uuids it may use; operations refuse every other bot (`Actor.for_token`).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from . import audit
from .audit import Actor
from .errors import NotFound, ValidationError
from .models import BotToken
from .scopes import derive_scope
from .wording import said

TOKEN_PREFIX = "mct_"
MAX_TOKEN_CHARS = 200
MAX_NAME_CHARS = 100


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def validate_bot_uuids(bot_uuids: Iterable[str]) -> list[str]:
    """Clean, de-duplicated bot_uuids; each must be a valid, non-empty bot_uuid (docs/design.md §2)."""
    out: list[str] = []
    for bot_uuid in bot_uuids:
        if not isinstance(bot_uuid, str) or not bot_uuid.strip():
            raise ValidationError("a bot_uuid must not be empty", field="bot_uuids")
        clean = derive_scope(bot_uuid, "token", "session").bot_uuid
        if clean not in out:
            out.append(clean)
    if not out:
        raise ValidationError("a token needs at least one bot_uuid", field="bot_uuids")
    return out


def create_token(name: str, bot_uuids: Iterable[str], actor: Actor, created_by: str = "") -> tuple[BotToken, str]:
    """Create a token for `bot_uuids`; returns (row, secret). The secret is never stored: show it once."""
    name = (name or "").strip()
    if not name or len(name) > MAX_NAME_CHARS or not name.isprintable():
        raise ValidationError(f"a token name is 1 to {MAX_NAME_CHARS} printable characters", field="name")
    bots = validate_bot_uuids(bot_uuids)
    for bot in bots:  # an actor limited to some bots makes tokens for those only
        actor.require_bot(bot)
    for _attempt in range(5):  # a prefix collision is possible (32 bits), so retry with a new one
        prefix = secrets.token_hex(4)
        secret = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
        try:
            with transaction.atomic():
                token = BotToken.objects.create(
                    name=name,
                    prefix=prefix,
                    token_hash=hash_secret(secret),
                    bot_uuids=bots,
                    created_by=created_by or actor.label,
                )
                audit.append(
                    "token_create",
                    actor,
                    target_type="bot_token",
                    target_id=prefix,
                    summary=said(
                        gettext_noop("bot token %(name)s (%(prefix)s) created for %(bots)s"),
                        name=repr(name),
                        prefix=prefix,
                        bots=", ".join(bots),
                    ),
                    after={"name": name, "prefix": prefix, "bot_uuids": bots},
                )
            return token, secret
        except IntegrityError:
            continue
    raise RuntimeError("could not pick a unique token prefix")


def authenticate(secret: str | None) -> BotToken | None:
    """The active token this secret belongs to, or None (unknown, malformed or revoked)."""
    if not secret or len(secret) > MAX_TOKEN_CHARS or not secret.startswith(TOKEN_PREFIX):
        return None
    token = BotToken.objects.filter(token_hash=hash_secret(secret)).first()
    if token is None or token.revoked_at is not None:
        return None
    return token


def visible_tokens(actor: Actor) -> list[BotToken]:
    """The tokens an actor may manage (those of its bots only), newest first."""
    rows = BotToken.objects.order_by("-created_at", "-id")
    return [token for token in rows if all(actor.may_use_bot(bot) for bot in token.bot_uuids)]


def get_visible_token(actor: Actor, token_id: int) -> BotToken:
    """One token the actor may manage; `NotFound` when absent or for another bot."""
    token = BotToken.objects.filter(pk=token_id).first()
    if token is None or not all(actor.may_use_bot(bot) for bot in token.bot_uuids):
        raise NotFound("no such token")
    return token


def find_token(prefix: str) -> BotToken | None:
    """The token with this prefix; `mct_<prefix>` and `mct_<prefix>_...` are accepted too."""
    prefix = prefix.strip()
    if prefix.startswith(TOKEN_PREFIX):
        prefix = prefix[len(TOKEN_PREFIX) :].split("_", 1)[0]
    return BotToken.objects.filter(prefix=prefix).first()


def revoke(token: BotToken, actor: Actor) -> bool:
    """Revoke a token (it answers 401 from then on). False when it was already revoked. Audited."""
    with transaction.atomic():
        now = timezone.now()
        changed = BotToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
        if not changed:
            return False
        token.revoked_at = now
        audit.append(
            "token_revoke",
            actor,
            target_type="bot_token",
            target_id=token.prefix,
            summary=said(
                gettext_noop("bot token %(name)s (%(prefix)s) revoked"), name=repr(token.name), prefix=token.prefix
            ),
            before={"revoked_at": None},
            after={"revoked_at": now.isoformat()},
        )
    return True
