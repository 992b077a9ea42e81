"""What every component of the plugin shares: its settings, the scope of a message by LangBot's
rules, and a memconsole client for that scope.

The scope is what LangBot's own LongTermMemory plugin derives: the bot's uuid, the session name
`{launcher_type}_{launcher_id}` and the isolation mode. memconsole derives the same keys from them
(`{bot_uuid}:{session_name}`, or `bot:{bot_uuid}` under bot isolation), so memory imported from the
old plugin keeps matching.
"""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass
from typing import Any

from langbot_plugin.api.proxies.query_based_api import QueryBasedAPIProxy
from memconsole_client import AsyncMemoryClient, MemconsoleError

__all__ = [
    "ADMIN_PRIVILEGE",
    "MemconsoleError",
    "PluginSettings",
    "SettingsError",
    "Speaker",
    "Turn",
    "api_of",
    "error_text",
    "forget_refusal",
    "is_group",
    "not_found",
    "one_line",
    "query_text",
    "session_name_of",
    "speaker_line",
    "speaker_of",
    "turn_of",
    "unexpected",
]

logger = logging.getLogger("memconsole.langbot")

ISOLATIONS = ("session", "bot")
MAX_QUERY_CHARS = 2000  # memconsole's limit of a recall or inject query (docs/api.md)
MAX_SPEAKER_CHARS = 255  # and of a speaker's id and name
LINE_BREAKING = {"Cc", "Zl", "Zp"}  # control characters, line and paragraph separators
DEFAULT_TOP_K = 3
MAX_TOP_K = 50
# LangBot runs a command with privilege 2 when the chat it comes from is in its `admins` list, else 1.
ADMIN_PRIVILEGE = 2


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
        if not token.isascii() or not token.isprintable() or " " in token:
            raise SettingsError(
                "memconsole_token holds a character no token has (an invisible one pasted with it?): paste it again"
            )
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
    """The current speaker, from the query variables LangBot sets for every message, as memconsole
    takes a speaker: on one line and within its length (a display name with a tab or a line break,
    or a very long one, would have every call of theirs refused)."""
    return Speaker(
        trimmed(one_line(query_vars.get("sender_id", "")))[:MAX_SPEAKER_CHARS],
        trimmed(one_line(query_vars.get("sender_name", "")))[:MAX_SPEAKER_CHARS],
    )


def trimmed(value: str) -> str:
    """`value` without invisible format characters (BOM, zero-width space) at its ends, as memconsole
    stores a speaker ("\ufeff10001" is 10001): comparing the two must see one person
    (memconsole's `validation.trimmed`, which this plugin cannot import)."""
    start, end = 0, len(value)
    while start < end and (value[start].isspace() or unicodedata.category(value[start]) == "Cf"):
        start += 1
    while end > start and (value[end - 1].isspace() or unicodedata.category(value[end - 1]) == "Cf"):
        end -= 1
    return value[start:end]


def query_text(value: Any) -> str:
    """A message as a recall or inject query: trimmed, and cut to memconsole's query limit (a long
    message still gets its memory, found from its beginning)."""
    return str(value or "").strip()[:MAX_QUERY_CHARS]


def one_line(value: Any) -> str:
    """A value on one line, as a tool or command prints it and as a speaker is sent: line breaks,
    control characters and other whitespace runs as single spaces, so a memory a chat participant
    wrote cannot pose as another record (memconsole's `validation.one_line`, which this plugin
    cannot import)."""
    text = "".join(" " if unicodedata.category(char) in LINE_BREAKING else char for char in str(value or ""))
    return " ".join(text.split())


def is_group(session_name: str) -> bool:
    """A group chat (`group_...`), where several people speak to the bot."""
    return session_name.startswith("group_")


def speaker_line(sender_id: Any, sender_name: Any) -> str:
    """A speaker as tools and commands print them: "Alice (u1)", so the model and the user see the
    id that `recall_memory`'s `speaker_id` takes."""
    sender_id, sender_name = one_line(sender_id), one_line(sender_name)
    if sender_name and sender_id:
        return f"{sender_name} ({sender_id})"
    return sender_name or sender_id or "unknown"


def not_found(error: MemconsoleError) -> bool:
    """memconsole's own "no such episode" (a 404 from something else, a wrong URL, is not one)."""
    return error.status == 404 and error.code == "not_found"


def api_of(component: Any, query_id: int, query_uuid: str | None = None) -> QueryBasedAPIProxy:
    """The SDK's proxy to the host for one query (its uuid when the host gave one)."""
    return QueryBasedAPIProxy(
        query_id=query_id, query_uuid=query_uuid, plugin_runtime_handler=component.plugin.plugin_runtime_handler
    )


def error_text(error: Exception) -> str:
    """What a tool or command answers when memconsole refused or could not be reached."""
    if isinstance(error, SettingsError):
        return f"Error: the memory plugin is not configured: {error}"
    if isinstance(error, MemconsoleError):
        if error.code == "invalid_url":
            return "Error: memconsole_url is not a valid address (http:// or https://, a host, a port up to 65535); check memconsole_url."
        if error.code == "bad_response":  # something else answers at that address
            return "Error: the memconsole address did not answer as memconsole does; check memconsole_url (the server, without /api/v1)."
        if error.status == 0:
            return "Error: memconsole cannot be reached; the memory is unavailable for now."
        if error.code == "http_error":  # not memconsole's API answering: a proxy, or a wrong address
            return f"Error: {error.status} from the memconsole address; check memconsole_url (the server, without /api/v1)."
        return f"Error: memconsole refused the request ({error.code}): {error.message}"
    return "Error: the memory failed unexpectedly (see the plugin's log); it is unavailable for now."


def unexpected(what: str, error: Exception) -> str:
    """Log a failure nobody expected (the answer goes on without memory) and say so as `error_text`."""
    logger.exception("memconsole plugin: %s failed unexpectedly: %s", what, error)
    return error_text(error)


async def forget_refusal(memory: AsyncMemoryClient, episode_id: str, speaker: Speaker) -> str | None:
    """Why `speaker` may not delete `episode_id` (someone else's memory, or none in this chat), or
    None when it is their own. A member forgets only what they said; an admin forgets anything."""
    statuses = ["active", "superseded", "archived"]
    hits = await memory.recall(episode_id, top_k=1, statuses=statuses)  # an id as the query finds that episode
    episode = next((hit for hit in hits if hit["episode_id"] == episode_id), None)
    if episode is None:
        return f"no memory {episode_id} in this chat."
    if not speaker.id or episode["sender_id"] != speaker.id:
        owner = speaker_line(episode["sender_id"], episode["sender_name"])
        return f"memory {episode_id} is {owner}'s, not yours: only an admin of the bot can forget it (!memory forget)."
    return None


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

    @property
    def console_url(self) -> str:
        """The memconsole console: the server's root (memconsole_url may end in /api/v1)."""
        url = self.settings.url.rstrip("/")
        return (url[: -len("/api/v1")] if url.endswith("/api/v1") else url) + "/"


async def turn_of(component: Any, api: Any, session_name: str) -> Turn:
    """The `Turn` of a message: `api` is the SDK's QueryBasedAPIProxy for its query."""
    settings = PluginSettings.of(component.get_plugin_config())
    query_vars = await api.get_query_vars()
    bot_uuid = await api.get_bot_uuid()
    return Turn(settings, bot_uuid, session_name, speaker_of(query_vars), query_vars)
