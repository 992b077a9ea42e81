"""The `recall_memory` tool: memconsole's ranked recall within this chat's memory.

Each memory is printed with its speaker's name and id ("Alice (u1)"): `speaker_id` takes that id.
A model often passes the name instead; a `speaker_id` that is no one's id but exactly one speaker's
name is read as that speaker, and one that matches nobody is answered as such, not as "no memories".
"""

from __future__ import annotations

from typing import Any

from langbot_plugin.api.definition.components.tool.tool import Tool
from langbot_plugin.api.entities.builtin.provider import session as provider_session
from memconsole_bridge import (
    MemconsoleError,
    SettingsError,
    Turn,
    api_of,
    error_text,
    one_line,
    query_text,
    session_name_of,
    speaker_line,
    turn_of,
    unexpected,
)
from memconsole_client import AsyncMemoryClient

MAX_TOP_K = 20
SPEAKER_SCAN = 100  # the newest episodes looked at for the chat's speakers (the API's largest page)


def _int(value: Any, default: int | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else default
    except (TypeError, ValueError):
        return default


async def speakers_of(memory: AsyncMemoryClient, turn: Turn) -> dict[str, str]:
    """The chat's known speakers, id -> name: the current one and those of its newest episodes."""
    known = {turn.speaker.id: turn.speaker.name} if turn.speaker.id else {}
    page = await memory.list_episodes(limit=SPEAKER_SCAN)
    for episode in page["episodes"]:
        if episode["sender_id"]:
            known.setdefault(episode["sender_id"], episode["sender_name"])
    return known


def resolve_speaker(given: str, known: dict[str, str]) -> str | None:
    """The id `given` means: itself when it is one, else the one speaker with that name (any case)."""
    if given in known:
        return given
    named = {sender_id for sender_id, name in known.items() if name and name.casefold() == given.casefold()}
    return named.pop() if len(named) == 1 else None


class RecallMemory(Tool):
    async def call(
        self, params: dict[str, Any], session: provider_session.Session, query_id: int, query_uuid: str | None = None
    ) -> str:
        query = query_text(params.get("query"))
        if not query:
            return "Error: query is required."
        top_k = max(1, min(MAX_TOP_K, _int(params.get("top_k"), 5) or 5))
        status = str(params.get("status") or "").strip().lower()
        speaker = one_line(params.get("speaker_id"))
        api = api_of(self, query_id, query_uuid)
        try:
            turn = await turn_of(self, api, session_name_of(session))
            async with turn.client() as memory:

                async def recall(sender_id: str | None) -> list[Any]:
                    return await memory.recall(
                        query,
                        top_k=top_k,
                        sender_id=sender_id,
                        importance_min=_int(params.get("importance_min"), None),
                        time_after=str(params.get("time_after") or "").strip() or None,
                        time_before=str(params.get("time_before") or "").strip() or None,
                        statuses=[status] if status else None,
                        speaker_id=turn.speaker.id or None,  # "what do I like?": the asker's own first
                    )

                hits = await recall(speaker or None)
                if speaker and not hits:
                    known = await speakers_of(memory, turn)
                    resolved = resolve_speaker(speaker, known)
                    if resolved is None:
                        listed = ", ".join(speaker_line(i, n) for i, n in list(known.items())[:10]) or "none yet"
                        return (
                            f"No speaker with the id {speaker!r} in this chat's memory. speaker_id is the id in "
                            f"brackets after a name (known speakers: {listed}); leave it out to search everyone."
                        )
                    if resolved != speaker:
                        hits = await recall(resolved)
        except (SettingsError, MemconsoleError) as error:
            return error_text(error)
        except Exception as error:
            return unexpected("recall_memory", error)
        if not hits:
            return "No matching memories."
        lines = []
        for n, hit in enumerate(hits, 1):
            who = speaker_line(hit["sender_id"], hit["sender_name"])
            when = (hit["timestamp"] or "")[:10] or "-"
            content = one_line(hit["content"])
            lines.append(f"[{n}] ({when}) {who}: {content} [id {hit['episode_id']}, score {hit['score']:.2f}]")
        return "\n".join(lines)
