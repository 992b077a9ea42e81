"""The `remember` tool: one episode stored in memconsole for this chat and speaker."""

from __future__ import annotations

from typing import Any

from langbot_plugin.api.definition.components.tool.tool import Tool
from langbot_plugin.api.entities.builtin.provider import session as provider_session
from memconsole_bridge import MemconsoleError, SettingsError, api_of, error_text, session_name_of, turn_of, unexpected


class Remember(Tool):
    async def call(
        self, params: dict[str, Any], session: provider_session.Session, query_id: int, query_uuid: str | None = None
    ) -> str:
        content = str(params.get("content", "") or "").strip()
        if not content:
            return "Error: content is required."
        tags = params.get("tags") or []
        if not isinstance(tags, list):
            return "Error: tags must be a list of short strings."
        importance = params.get("importance", 2)
        if isinstance(importance, str) and importance.strip().isdecimal():  # a model may send "5"
            importance = int(importance.strip())
        if isinstance(importance, bool) or not isinstance(importance, int):
            return "Error: importance must be a whole number from 1 to 5."
        api = api_of(self, query_id, query_uuid)
        try:
            turn = await turn_of(self, api, session_name_of(session))
            async with turn.client() as memory:
                result = await memory.remember(
                    content,
                    sender_id=turn.speaker.id,
                    sender_name=turn.speaker.name,
                    tags=[str(tag) for tag in tags],
                    importance=importance,
                    query_id=str(query_id),
                )
        except (SettingsError, MemconsoleError) as error:
            return error_text(error)
        except Exception as error:
            return unexpected("remember", error)
        answer = f"Remembered: {content}"
        if result["superseded"]:
            answer += f" (it corrects {len(result['superseded'])} earlier memory: {', '.join(result['superseded'])})"
        return answer
