"""The `recall_memory` tool: memconsole's ranked recall within this chat's memory."""

from __future__ import annotations

from typing import Any

from langbot_plugin.api.definition.components.tool.tool import Tool
from langbot_plugin.api.entities.builtin.provider import session as provider_session
from memconsole_bridge import (
    MemconsoleError,
    SettingsError,
    api_of,
    error_text,
    one_line,
    query_text,
    session_name_of,
    turn_of,
)

MAX_TOP_K = 20


def _int(value: Any, default: int | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else default
    except (TypeError, ValueError):
        return default


class RecallMemory(Tool):
    async def call(
        self, params: dict[str, Any], session: provider_session.Session, query_id: int, query_uuid: str | None = None
    ) -> str:
        query = query_text(params.get("query"))
        if not query:
            return "Error: query is required."
        top_k = max(1, min(MAX_TOP_K, _int(params.get("top_k"), 5) or 5))
        status = str(params.get("status") or "").strip().lower()
        api = api_of(self, query_id, query_uuid)
        try:
            turn = await turn_of(self, api, session_name_of(session))
            async with turn.client() as memory:
                hits = await memory.recall(
                    query,
                    top_k=top_k,
                    sender_id=str(params.get("speaker_id") or "").strip() or None,
                    importance_min=_int(params.get("importance_min"), None),
                    time_after=str(params.get("time_after") or "").strip() or None,
                    time_before=str(params.get("time_before") or "").strip() or None,
                    statuses=[status] if status else None,
                    speaker_id=turn.speaker.id or None,  # "what do I like?": the asker's own first
                )
        except (SettingsError, MemconsoleError) as error:
            return error_text(error)
        if not hits:
            return "No matching memories."
        lines = []
        for n, hit in enumerate(hits, 1):
            who = one_line(hit["sender_name"] or hit["sender_id"] or "unknown")
            when = (hit["timestamp"] or "")[:10] or "-"
            content = one_line(hit["content"])
            lines.append(f"[{n}] ({when}) {who}: {content} [id {hit['episode_id']}, score {hit['score']:.2f}]")
        return "\n".join(lines)
