"""The `update_profile` tool: a change to the session or speaker profile in memconsole.

memconsole keeps every version. A `set` of a list field replaces the whole list with a guarded
update (`if_version`), so a change made meanwhile by someone else is never overwritten.
"""

from __future__ import annotations

from typing import Any

from langbot_plugin.api.definition.components.tool.tool import Tool
from langbot_plugin.api.entities.builtin.provider import session as provider_session
from memconsole_bridge import (
    MemconsoleError,
    SettingsError,
    api_of,
    error_text,
    session_name_of,
    turn_of,
    unexpected,
)
from memconsole_client import AsyncMemoryClient

FIELDS = ("name", "traits", "preferences", "notes")
ACTIONS = ("set", "add", "remove")


def changes_for(field: str, action: str, value: str, current: dict[str, Any]) -> dict[str, Any]:
    """The memconsole profile update for one tool call (`current` is the profile read, for `set`)."""
    if field in ("traits", "preferences"):
        if action == "add":
            return {f"add_{field}": [value]}
        if action == "remove":
            return {f"remove_{field}": [value]}
        old = [item for item in current.get(field, []) if item != value]
        return {f"remove_{field}": old or None, f"add_{field}": [value], "if_version": current.get("version", 0)}
    if field == "notes" and action == "add":
        return {"append_notes": value}
    return {field: "" if action == "remove" else value}


async def apply(
    memory: AsyncMemoryClient, profile_type: str, sender_id: str, field: str, action: str, value: str
) -> str:
    current: dict[str, Any] = {}
    if action == "set" and field in ("traits", "preferences"):
        current = dict(await memory.get_profile(profile_type, sender_id))
    profile = await memory.update_profile(profile_type, sender_id, **changes_for(field, action, value, current))
    shown = dict(profile).get(field)
    return f"Profile updated: {field} = {', '.join(shown) if isinstance(shown, list) else shown}"


class UpdateProfile(Tool):
    async def call(
        self, params: dict[str, Any], session: provider_session.Session, query_id: int, query_uuid: str | None = None
    ) -> str:
        field = str(params.get("field", "") or "").strip()
        action = str(params.get("action", "") or "").strip()
        value = str(params.get("value", "") or "").strip()
        if field not in FIELDS:
            return f"Error: field must be one of {', '.join(FIELDS)}."
        if action not in ACTIONS:
            return f"Error: action must be one of {', '.join(ACTIONS)}."
        if not value and not (action == "remove" and field in ("name", "notes")):
            return "Error: value is required."
        api = api_of(self, query_id, query_uuid)
        try:
            turn = await turn_of(self, api, session_name_of(session))
            scope = str(params.get("scope") or ("speaker" if turn.speaker.id else "session"))
            if scope == "speaker" and not turn.speaker.id:
                return "Error: no current speaker is known; use scope 'session'."
            sender_id = turn.speaker.id if scope == "speaker" else ""
            async with turn.client() as memory:
                try:
                    return await apply(memory, scope, sender_id, field, action, value)
                except MemconsoleError as error:
                    if error.code != "conflict":
                        raise
                    # Someone changed the profile between the read and the write: read again, once.
                    return await apply(memory, scope, sender_id, field, action, value)
        except (SettingsError, MemconsoleError) as error:
            return error_text(error)
        except Exception as error:
            return unexpected("update_profile", error)
