"""The `forget` tool: delete one episode of this chat in memconsole (audited there)."""

from __future__ import annotations

from typing import Any

from langbot_plugin.api.definition.components.tool.tool import Tool
from langbot_plugin.api.entities.builtin.provider import session as provider_session
from langbot_plugin.api.proxies.query_based_api import QueryBasedAPIProxy
from memconsole_bridge import MemconsoleError, SettingsError, error_text, session_name_of, turn_of


class Forget(Tool):
    async def call(self, params: dict[str, Any], session: provider_session.Session, query_id: int) -> str:
        episode_id = str(params.get("episode_id", "") or "").strip()
        if not episode_id:
            return "Error: episode_id is required."
        api = QueryBasedAPIProxy(query_id=query_id, plugin_runtime_handler=self.plugin.plugin_runtime_handler)
        try:
            turn = await turn_of(self, api, session_name_of(session))
            async with turn.client() as memory:
                await memory.forget(episode_id)
        except MemconsoleError as error:
            if error.status == 404:
                return f"No memory {episode_id} in this chat."
            return error_text(error)
        except SettingsError as error:
            return error_text(error)
        return f"Forgot memory {episode_id}."
