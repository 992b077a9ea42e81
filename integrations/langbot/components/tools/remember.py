"""The `remember` tool: one episode stored in memconsole for this chat and speaker."""

from __future__ import annotations

from typing import Any

from langbot_plugin.api.definition.components.tool.tool import Tool
from langbot_plugin.api.entities.builtin.provider import session as provider_session
from langbot_plugin.api.proxies.query_based_api import QueryBasedAPIProxy
from memconsole_bridge import MemconsoleError, SettingsError, error_text, session_name_of, turn_of


class Remember(Tool):
    async def call(self, params: dict[str, Any], session: provider_session.Session, query_id: int) -> str:
        content = str(params.get("content", "") or "").strip()
        if not content:
            return "Error: content is required."
        tags = params.get("tags") or []
        if not isinstance(tags, list):
            return "Error: tags must be a list of short strings."
        importance = params.get("importance", 2)
        api = QueryBasedAPIProxy(query_id=query_id, plugin_runtime_handler=self.plugin.plugin_runtime_handler)
        try:
            turn = await turn_of(self, api, session_name_of(session))
            async with turn.client() as memory:
                result = await memory.remember(
                    content,
                    sender_id=turn.speaker.id,
                    sender_name=turn.speaker.name,
                    tags=[str(tag) for tag in tags],
                    importance=importance if isinstance(importance, int) else 2,
                    query_id=str(query_id),
                )
        except (SettingsError, MemconsoleError) as error:
            return error_text(error)
        answer = f"Remembered: {content}"
        if result["superseded"]:
            answer += f" (it corrects {len(result['superseded'])} earlier memory: {', '.join(result['superseded'])})"
        return answer
