"""Who performs an operation (`Actor`): a console user, a bot token or the system, and the bots
they may use. Every audit entry names its actor (`audit.append`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import PermissionDenied

if TYPE_CHECKING:
    from .scopes import ScopeKeys


@dataclass(frozen=True)
class Actor:
    """Who performs an operation: a console user, a bot token or the system.

    `bot_uuids`, when set, limits the actor to those bots; operations refuse any other scope.
    """

    type: str  # user | token | system
    name: str
    bot_uuids: frozenset[str] | None = field(default=None)

    @classmethod
    def system(cls, name: str = "system") -> Actor:
        return cls("system", name)

    @classmethod
    def for_user(cls, user: Any, bot_uuids: frozenset[str] | None = None) -> Actor:
        return cls("user", user.get_username(), bot_uuids)

    @classmethod
    def for_token(cls, token: Any) -> Actor:
        return cls("token", f"token:{token.prefix}:{token.name}", frozenset(token.bot_uuids))

    @property
    def label(self) -> str:
        return f"{self.type}:{self.name}" if self.type != "token" else self.name

    def may_use_bot(self, bot_uuid: str) -> bool:
        """Whether this actor may read or change the memory of bot `bot_uuid`."""
        return self.bot_uuids is None or bot_uuid in self.bot_uuids

    def require_bot(self, keys_or_bot_uuid: ScopeKeys | str) -> None:
        """`PermissionDenied` unless this actor may use the bot (of these scope keys)."""
        bot_uuid = keys_or_bot_uuid if isinstance(keys_or_bot_uuid, str) else keys_or_bot_uuid.bot_uuid
        if not self.may_use_bot(bot_uuid):
            raise PermissionDenied("this actor may not use this bot's memory")
