"""What every component of the plugin shares: its settings, the scope of a message by LangBot's
rules, and a memconsole client for that scope.

The scope is what LangBot's own LongTermMemory plugin derives: the bot's uuid, the session name
`{launcher_type}_{launcher_id}` and the isolation mode. memconsole derives the same keys from them
(`{bot_uuid}:{session_name}`, or `bot:{bot_uuid}` under bot isolation), so memory imported from the
old plugin keeps matching.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from memconsole_client import AsyncMemoryClient, MemconsoleError

__all__ = [
    "MemconsoleError",
    "PluginSettings",
    "SettingsError",
    "Speaker",
    "Turn",
    "error_text",
    "one_line",
    "session_name_of",
    "speaker_of",
    "turn_of",
]

logger = logging.getLogger("memconsole.langbot")

ISOLATIONS = ("session", "bot")
DEFAULT_TOP_K = 3
MAX_TOP_K = 50


class SettingsError(ValueError):
    """The plugin's configuration cannot work; the message says which setting to fix."""


@dataclass(frozen=True)
class PluginSettings:
    url: str
    token: str
    isolation: str
    top_k: int

    @classmethod
    def of(cls, config: dict[str, Any]) -> PluginSettings:
        url = str(config.get("memconsole_url") or "").strip()
        token = str(config.get("memconsole_token") or "").strip()
        if not url:
            raise SettingsError("memconsole_url is not set: the plugin needs the memconsole server's address")
        if not token:
            raise SettingsError("memconsole_token is not set: create a bot token in memconsole's Tokens screen")
        isolation = str(config.get("isolation") or "session").strip().lower()
        if isolation not in ISOLATIONS:
            raise SettingsError(f"isolation must be 'session' or 'bot', not {isolation!r}")
        try:
            top_k = int(config.get("auto_recall_top_k", DEFAULT_TOP_K))
        except (TypeError, ValueError):
            top_k = DEFAULT_TOP_K
        return cls(url, token, isolation, max(1, min(MAX_TOP_K, top_k)))

    def client(self, bot_uuid: str, session_name: str) -> AsyncMemoryClient:
        """A client for one chat; close it (`async with`) when the call is done."""
        return AsyncMemoryClient(self.url, self.token, bot_uuid, session_name, self.isolation)


@dataclass(frozen=True)
class Speaker:
    id: str
    name: str


def session_name_of(session: Any) -> str:
    """LangBot's session name of a provider `Session`: `{launcher_type}_{launcher_id}`."""
    launcher_type = getattr(session.launcher_type, "value", session.launcher_type)
    return f"{launcher_type}_{session.launcher_id}"


def speaker_of(query_vars: dict[str, Any]) -> Speaker:
    """The current speaker, from the query variables LangBot sets for every message."""
    return Speaker(str(query_vars.get("sender_id", "") or ""), str(query_vars.get("sender_name", "") or ""))


def one_line(value: Any) -> str:
    """A stored value as a tool or command prints it: on one line (line breaks and other whitespace
    runs as single spaces), so a memory a chat participant wrote cannot pose as another record, as
    memconsole's own injected block does (`injection.one_line`)."""
    return " ".join(str(value or "").split())


def error_text(error: Exception) -> str:
    """What a tool or command answers when memconsole refused or could not be reached."""
    if isinstance(error, SettingsError):
        return f"Error: the memory plugin is not configured: {error}"
    if isinstance(error, MemconsoleError):
        if error.status == 0:
            return "Error: memconsole cannot be reached; the memory is unavailable for now."
        return f"Error: memconsole refused the request ({error.code}): {error.message}"
    return f"Error: {error}"


@dataclass(frozen=True)
class Turn:
    """One message being handled: its settings, scope and speaker, read from the LangBot host."""

    settings: PluginSettings
    bot_uuid: str
    session_name: str
    speaker: Speaker
    query_vars: dict[str, Any]

    def client(self) -> AsyncMemoryClient:
        return self.settings.client(self.bot_uuid, self.session_name)


async def turn_of(component: Any, api: Any, session_name: str) -> Turn:
    """The `Turn` of a message: `api` is the SDK's QueryBasedAPIProxy for its query."""
    settings = PluginSettings.of(component.get_plugin_config())
    query_vars = await api.get_query_vars()
    bot_uuid = await api.get_bot_uuid()
    return Turn(settings, bot_uuid, session_name, speaker_of(query_vars), query_vars)
