"""The `forget` tool: delete one episode of this chat in memconsole (audited there).

Only the current speaker's own memories: a tool call carries no privilege, and in a group chat (or
any chat of a bot-isolated memory) the memory asked about may be another member's. An admin
deletes those with `!memory forget`.
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
    forget_refusal,
    not_found,
    session_name_of,
    turn_of,
    unexpected,
)


class Forget(Tool):
    async def call(
        self, params: dict[str, Any], session: provider_session.Session, query_id: int, query_uuid: str | None = None
    ) -> str:
        episode_id = str(params.get("episode_id", "") or "").strip()
        if not episode_id:
            return "Error: episode_id is required."
        api = api_of(self, query_id, query_uuid)
        try:
            turn = await turn_of(self, api, session_name_of(session))
            async with turn.client() as memory:
                refusal = await forget_refusal(memory, episode_id, turn.speaker)
                if refusal is not None:
                    return refusal[0].upper() + refusal[1:]
                await memory.forget(episode_id)
        except MemconsoleError as error:
            if not_found(error):
                return f"No memory {episode_id} in this chat."
            return error_text(error)
        except SettingsError as error:
            return error_text(error)
        except Exception as error:
            return unexpected("forget", error)
        return f"Forgot memory {episode_id}."
