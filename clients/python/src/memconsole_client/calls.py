"""The request each client method sends: one builder per API endpoint (docs/api.md), shared by
`MemoryClient` and `AsyncMemoryClient` so that the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from .transport import Call, timestamp

__all__ = [
    "append_message",
    "export",
    "forget",
    "forget_fact",
    "forget_session",
    "get_profile",
    "inject",
    "list_episodes",
    "list_sessions",
    "recall",
    "recall_facts",
    "recent_messages",
    "remember",
    "remember_fact",
    "remember_many",
    "update_profile",
]


# What an answer must hold (`Call.expects`), for the answers several calls share.
REMEMBERED = (("episode_id", str), ("status", str), ("superseded", list))
PROFILE = (("name", str), ("traits", list), ("preferences", list), ("notes", str), ("version", int))


def remember(
    content: str,
    *,
    sender_id: str,
    sender_name: str,
    tags: list[str] | None,
    importance: int,
    timestamp_: datetime | str | None,
    query_id: str | None,
    kind: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Call:
    return Call(
        "POST",
        "remember",
        {
            "content": content,
            "sender_id": sender_id,
            "sender_name": sender_name,
            "tags": tags or [],
            "importance": importance,
            "timestamp": timestamp(timestamp_),
            "query_id": query_id,
            "kind": kind,
            "metadata": metadata,
        },
        expects=REMEMBERED,
    )


def remember_many(episodes: Iterable[Mapping[str, Any] | str]) -> Call:
    """One request for many episodes: each a dict of `remember`'s keywords (a string is a content)."""
    items = []
    for episode in episodes:
        item: dict[str, Any] = {"content": episode} if isinstance(episode, str) else dict(episode)
        if "timestamp" in item:
            item["timestamp"] = timestamp(item["timestamp"])
        items.append({key: value for key, value in item.items() if value is not None})
    return Call("POST", "remember", {"episodes": items}, expects=(("episodes", list), ("batch_id", str)))


def recall(
    query: str,
    *,
    top_k: int,
    sender_id: str | None,
    importance_min: int | None,
    time_after: datetime | str | None,
    time_before: datetime | str | None,
    tags: list[str] | None,
    statuses: list[str] | None,
    speaker_id: str | None = None,
    kind: str | None = None,
) -> Call:
    return Call(
        "POST",
        "recall",
        {
            "query": query,
            "top_k": top_k,
            "sender_id": sender_id,
            "importance_min": importance_min,
            "time_after": timestamp(time_after),
            "time_before": timestamp(time_before),
            "tags": tags,
            "statuses": statuses,
            "speaker_id": speaker_id,
            "kind": kind,
        },
        expects=(("episodes", list),),
    )


def get_profile(type: str, sender_id: str) -> Call:
    fields = {"type": type, "sender_id": sender_id} if sender_id else {"type": type}
    return Call("GET", "profile", fields, expects=PROFILE)


def update_profile(
    type: str,
    sender_id: str,
    *,
    name: str | None,
    notes: str | None,
    add_traits: list[str] | None,
    remove_traits: list[str] | None,
    add_preferences: list[str] | None,
    remove_preferences: list[str] | None,
    append_notes: str | None,
    if_version: int | None,
) -> Call:
    changes = {key: value for key, value in {"name": name, "notes": notes}.items() if value is not None}
    return Call(
        "POST",
        "profile",
        {
            "type": type,
            "sender_id": sender_id,
            "set": changes,
            "add_traits": add_traits,
            "remove_traits": remove_traits,
            "add_preferences": add_preferences,
            "remove_preferences": remove_preferences,
            "append_notes": append_notes,
            "if_version": if_version,
        },
        expects=PROFILE,
    )


def list_episodes(*, status: str | None, limit: int | None, cursor: str | None, kind: str | None = None) -> Call:
    fields = {"status": status, "limit": limit, "cursor": cursor, "kind": kind}
    return Call("GET", "episodes", fields, expects=(("episodes", list), ("next_cursor", (str, type(None)))))


def export() -> Call:
    return Call("GET", "export", {})


def forget(episode_id: str) -> Call:
    return Call("POST", "forget", {"episode_id": episode_id}, expects=(("deleted", bool),))


def forget_session() -> Call:
    return Call("POST", "forget", {"all": True}, expects=(("count", int),))


def remember_fact(subject: str, key: str, value: str) -> Call:
    return Call("POST", "facts", {"subject": subject, "key": key, "value": value}, expects=(("value", str),))


def recall_facts(subject: str, key: str | None) -> Call:
    return Call("GET", "facts", {"subject": subject, "key": key}, expects=(("facts", list),))


def forget_fact(subject: str, key: str) -> Call:
    return Call("POST", "facts/forget", {"subject": subject, "key": key}, expects=(("forgotten", bool),))


def append_message(
    role: str, content: str, *, sender_id: str | None, sender_name: str | None, created_at: datetime | str | None
) -> Call:
    return Call(
        "POST",
        "messages",
        {
            "role": role,
            "content": content,
            "sender_id": sender_id,
            "sender_name": sender_name,
            "created_at": timestamp(created_at),
        },
        expects=(("role", str), ("content", str)),
    )


def recent_messages(limit: int | None) -> Call:
    return Call("GET", "messages", {"limit": limit}, expects=(("messages", list),))


def list_sessions(limit: int | None) -> Call:
    # A bot's sessions, not one chat's: only the bot_uuid of the scope is sent.
    return Call("GET", "sessions", {"limit": limit}, scope_fields=("bot_uuid",), expects=(("sessions", list),))


def inject(
    query: str, *, sender_id: str, sender_name: str, query_id: str, top_k: int, include_window: bool = False
) -> Call:
    body: dict[str, Any] = {
        "query": query,
        "query_id": query_id,
        "sender_id": sender_id,
        "sender_name": sender_name,
        "top_k": top_k,
    }
    if include_window:  # the chat's conversation window as context["history"]
        body["include_window"] = True
    return Call("POST", "inject", body, expects=(("context", dict), ("system_blocks", list), ("snapshot_id", str)))
