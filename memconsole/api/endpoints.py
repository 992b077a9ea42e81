"""Bot-facing endpoints under /api/v1/ (docs/api.md): each checks its scope and calls one domain operation."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Router
from ninja.responses import Status

from memconsole.memory import episodes, injection, profiles, retrieval
from memconsole.memory.models import PROFILE_SESSION

from .auth import actor_for, scope_for
from .bots import forget_answer
from .parser import JsonBody, JsonBodyEither, StrictQuery
from .remember import RememberBatchRequest, RememberBatchResponse, RememberBody, remember_answer, remember_batch
from .schemas import (
    ForgetRequest,
    ForgetResponse,
    InjectRequest,
    InjectResponse,
    Profile,
    ProfileQuery,
    ProfileUpdateRequest,
    ProfileUpdateResponse,
    RecallRequest,
    RecallResponse,
    RememberResponse,
)

router = Router()


@router.post(
    "remember",
    response={201: RememberResponse | RememberBatchResponse},
    summary="Store one episode, or a batch of episodes of one scope (all or nothing)",
)
def remember(request: HttpRequest, payload: Annotated[RememberBody, JsonBodyEither(...)]) -> Status[dict[str, Any]]:
    if isinstance(payload, RememberBatchRequest):
        return Status(201, remember_batch(request, payload))
    keys = scope_for(request, *payload.scope())
    result = episodes.remember(
        keys, actor_for(request), payload.content, **payload.operation_fields(exclude={"content"})
    )
    return Status(201, remember_answer(result))


@router.post("recall", response=RecallResponse, summary="Semantic search within the scope")
def recall(request: HttpRequest, payload: Annotated[RecallRequest, JsonBody(...)]) -> dict[str, Any]:
    keys = scope_for(request, *payload.scope())
    fields = payload.operation_fields(exclude={"query"})
    hits = retrieval.recall(keys, payload.query, actor=actor_for(request), **fields)
    return {"episodes": [hit.as_dict() for hit in hits]}


@router.get(
    "profile",
    response=Profile,
    summary="Read a session or speaker profile (empty fields when there is none yet)",
    url_name="profile",
)
def get_profile(request: HttpRequest, params: Annotated[ProfileQuery, StrictQuery(...)]) -> dict[str, Any]:
    keys = scope_for(request, *params.scope())
    profile_type, sender_id = params.type or PROFILE_SESSION, params.sender_id or ""
    data, row = profiles.get_profile(keys, profile_type, sender_id)
    return profiles.profile_answer(profile_type, sender_id, data, row)


@router.post(
    "profile",
    response=ProfileUpdateResponse,
    summary="Change a profile (each change keeps the previous version)",
    url_name="profile_update",
)
def update_profile(request: HttpRequest, payload: Annotated[ProfileUpdateRequest, JsonBody(...)]) -> dict[str, Any]:
    keys = scope_for(request, *payload.scope())
    profile_type, sender_id = payload.type or PROFILE_SESSION, payload.sender_id or ""
    changes = payload.changes.model_dump(exclude_none=True) if payload.changes else {}
    fields = payload.operation_fields(exclude={"type", "sender_id", "changes"})
    change = profiles.change_profile(keys, actor_for(request), profile_type, sender_id, **changes, **fields)
    return profiles.profile_change_answer(profile_type, sender_id, change)


@router.post("forget", response=ForgetResponse, summary="Delete one episode, or all written in this session")
def forget(request: HttpRequest, payload: Annotated[ForgetRequest, JsonBody(...)]) -> dict[str, Any]:
    keys = scope_for(request, *payload.scope())
    return forget_answer(keys, actor_for(request), payload.episode_id, payload.all)


@router.post(
    "inject",
    response=InjectResponse,
    summary="Build the memory for a prompt and record it as an injection snapshot",
)
def inject(request: HttpRequest, payload: Annotated[InjectRequest, JsonBody(...)]) -> dict[str, Any]:
    keys = scope_for(request, *payload.scope())
    fields = payload.operation_fields(exclude={"query"})
    made = injection.record_injection(keys, actor_for(request), payload.query, **fields)
    return {"context": made.context, "system_blocks": made.system_blocks, "snapshot_id": made.snapshot.snapshot_id}
