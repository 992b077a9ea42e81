"""A bot's reads of its own memory as a whole (docs/api.md): the list of a chat's episodes and the
chat's export document (LangBot's `!memory list` and `!memory export`), and the explanation of one
of its injections (the snapshot: what was considered, what was injected and why)."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router
from pydantic import BaseModel, Field

from memconsole.memory import exports, queries, sessions
from memconsole.memory.errors import NotFound
from memconsole.memory.models import STATUS_ACTIVE

from .auth import actor_for, scope_for
from .fields import Kind, StatusName
from .parser import StrictQuery
from .schemas import EpisodeId, ScopedRequest, Timestamp

router = Router()

LIST_DEFAULT, LIST_MAX = 20, 100


class EpisodeListQuery(ScopedRequest):
    status: StatusName | None = Field(None, description="the episodes of this status (default active)")
    limit: Annotated[int, Field(ge=1, le=LIST_MAX)] | None = Field(
        None, description=f"page size (default {LIST_DEFAULT})"
    )
    cursor: Annotated[str, Field(max_length=40)] | None = Field(None, description="`next_cursor` of the previous page")
    kind: Kind | None = Field(None, description="the episodes of this kind (issue 20)")


class ListedEpisode(BaseModel):
    episode_id: EpisodeId
    content: str
    tags: list[str]
    importance: Annotated[int, Field(ge=1, le=5)]
    timestamp: Timestamp | None
    sender_id: str
    sender_name: str
    source: str
    status: StatusName
    superseded_by: str
    kind: str = Field("", description="'' for none")
    metadata: dict[str, Any] = Field(default_factory=dict)


class EpisodeList(BaseModel):
    episodes: list[ListedEpisode]
    next_cursor: str | None = Field(description="pass as `cursor` for the next (older) page; null on the last")


class ExportQuery(ScopedRequest):
    pass


@router.get(
    "episodes",
    response=EpisodeList,
    summary="List this chat's episodes, newest stored first (one status at a time)",
    url_name="episode_list",
)
def list_episodes(request: HttpRequest, params: Annotated[EpisodeListQuery, StrictQuery(...)]) -> dict[str, Any]:
    keys = scope_for(request, *params.scope())
    page = sessions.episode_page(
        keys, params.status or STATUS_ACTIVE, params.cursor, params.limit or LIST_DEFAULT, params.kind or ""
    )
    records = []
    for episode in page.items:
        record = exports.episode_record(episode)
        record["episode_id"] = record.pop("id")
        records.append(record)
    return {"episodes": records, "next_cursor": page.next_cursor}


@router.get(
    "export",
    response={200: dict[str, Any]},
    summary="This chat's memory as a memconsole export document (every status, profiles included); audited",
    url_name="export",
)
def export(request: HttpRequest, params: Annotated[ExportQuery, StrictQuery(...)]) -> StreamingHttpResponse:
    keys = scope_for(request, *params.scope())
    stream = exports.stream_scope_export(keys, actor_for(request))
    response = StreamingHttpResponse(stream, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{exports.export_filename(keys)}"'
    return response


class SnapshotQuery(ScopedRequest):
    pass


class Snapshot(BaseModel):
    snapshot_id: str
    recorded_at: Timestamp
    query_id: str
    query: str
    session_name: str
    isolation: str
    speaker: dict[str, Any]
    injected: bool = Field(description="whether any block went into the prompt")
    episode_count: int
    injection_chars: int
    system_blocks: list[str]
    episodes: list[dict[str, Any]] = Field(description="the episodes injected, as the bot received them")
    decision: dict[str, Any] | None = Field(
        description="the retrieval: floor, top_k and every candidate with its score breakdown and outcome "
        "(injected, below_floor, cut_by_top_k, duplicate); null for a snapshot recorded before candidates were kept"
    )


@router.get(
    "snapshots/{snapshot_id}",
    response=Snapshot,
    summary="One injection of this chat, explained: what was considered, injected and dropped, and why",
    url_name="snapshot",
)
def snapshot(
    request: HttpRequest, snapshot_id: str, params: Annotated[SnapshotQuery, StrictQuery(...)]
) -> dict[str, Any]:
    keys = scope_for(request, *params.scope())
    row = queries.find_snapshot(keys, snapshot_id[:64])
    if row is None:
        raise NotFound("no such snapshot in this chat")
    payload = row.payload
    return {
        "snapshot_id": row.snapshot_id,
        "recorded_at": exports.iso(row.recorded_at),
        "query_id": row.query_id,
        "query": str(payload.get("query", "")),
        "session_name": row.session_name,
        "isolation": row.isolation,
        "speaker": payload.get("speaker") or {"id": row.speaker_id, "name": ""},
        "injected": row.injected,
        "episode_count": row.episode_count,
        "injection_chars": row.injection_chars,
        "system_blocks": payload.get("system_blocks") or [],
        "episodes": payload.get("episodes") or [],
        "decision": payload.get("retrieval"),
    }
