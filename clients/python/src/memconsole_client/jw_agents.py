"""The jw-agents `MemoryStore` protocol, served by memconsole (issue 20).

An agent written against jw-agents' store works unchanged over memconsole:

    from memconsole_client.jw_agents import MemconsoleMemoryStore, MemoryRecord

    store = MemconsoleMemoryStore("https://memory.example.org", token, bot_uuid="agent-1")
    store.record(MemoryRecord("s-42", datetime.now(timezone.utc), "question", "Do you ship to Oslo?", {}))
    store.recall(session_id="s-42", query="shipping", kind="question")
    store.list_sessions()
    store.forget("s-42")

Each jw-agents session is one memconsole session of the store's bot (session isolation: a session's
records are its own space, `session_name` = the session id). A record is an episode: its `kind`
and `metadata` are the episode's own (the metadata sealed at rest like the content), its timestamp
the episode's time. `recall` without a session searches every session of the bot (one call each)
and merges them; with a query they are ordered by relevance (memconsole's score), without one
newest first (by the record's timestamp, among each session's most recently stored records).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, Literal, cast, get_args

import httpx

from .client import MemoryClient
from .transport import Retry

__all__ = ["KINDS", "Kind", "MemconsoleMemoryStore", "MemoryRecord"]

Kind = Literal["question", "answer", "fact_recalled", "preference", "objection"]
KINDS: tuple[str, ...] = get_args(Kind)
RECALL_MAX = 50  # the API's top_k limit: a query returns at most this many per session
LIST_PAGE = 100  # the API's page size limit for listing a session
STATUSES = ("active", "archived", "superseded")  # a record may have been archived in the console


@dataclass(frozen=True)
class MemoryRecord:
    """One jw-agents memory record."""

    session_id: str
    timestamp: datetime  # UTC (a naive time is read as UTC)
    kind: Kind
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)


class MemconsoleMemoryStore:
    """jw-agents' `MemoryStore` (record / recall / list_sessions / forget) over memconsole's API.

    Give the server, a bot token and the bot the agent's memory belongs to; `http_client`, `timeout`
    and `retry` are `MemoryClient`'s. Records persist on the server: a new store for the same bot
    sees them. Use it as a context manager, or `close()` it, to close its connection pool.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        bot_uuid: str,
        *,
        timeout: float = 10.0,
        retry: Retry | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        # The session name is a placeholder: every call goes through `_session(...)`.
        self._client = MemoryClient(
            base_url, token, bot_uuid, "jw-agents", "session", timeout, retry=retry, http_client=http_client
        )

    @property
    def client(self) -> MemoryClient:
        """The memconsole client underneath (its `for_session(session_id)` is one session's memory)."""
        return self._client

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> MemconsoleMemoryStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- the protocol -----------------------------------------------------------------------------

    def record(self, record: MemoryRecord) -> None:
        """Store one record in its session (`MemconsoleError` when the server refuses it)."""
        if record.kind not in KINDS:
            raise ValueError(f"unknown kind {record.kind!r} (use {', '.join(KINDS)})")
        self._session(record.session_id).remember(
            record.content,
            timestamp=_utc(record.timestamp),
            kind=record.kind,
            metadata=dict(record.metadata),
        )

    def recall(
        self,
        *,
        session_id: str | None = None,
        query: str | None = None,
        kind: Kind | None = None,
        limit: int = 10,
    ) -> list[MemoryRecord]:
        """The records passing every filter given (ANDed): of one session or all, matching `query`
        (by relevance) or not (newest first), of one kind; at most `limit`."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError("limit must be a positive whole number")
        if kind is not None and kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r} (use {', '.join(KINDS)})")
        sessions = [session_id] if session_id is not None else self.list_sessions()
        if query is not None and query.strip():
            scored: list[tuple[float, MemoryRecord]] = []
            for name in sessions:
                hits = self._session(name).recall(query, top_k=min(limit, RECALL_MAX), kind=kind)
                for hit in hits:
                    record = _record(name, hit)
                    if record is not None:
                        scored.append((hit["score"], record))
            scored.sort(key=lambda pair: pair[0], reverse=True)
            return [record for _, record in scored[:limit]]
        found: list[MemoryRecord] = []
        for name in sessions:
            found.extend(self._newest(name, kind, limit))
        found.sort(key=lambda record: record.timestamp, reverse=True)
        return found[:limit]

    def list_sessions(self) -> list[str]:
        """The sessions that hold records, most recently used first."""
        return [
            row["session_name"]
            for row in self._client.list_sessions()
            if row["isolation"] == "session" and row["episodes"] > 0
        ]

    def forget(self, session_id: str) -> int:
        """Remove every record of the session; returns how many were removed. Only its records:
        episodes of the same session written by something else (no jw-agents kind) stay."""
        session = self._session(session_id)
        ids = [
            episode["episode_id"]
            for kind in KINDS
            for status in STATUSES
            for episode in self._all(session, status=status, kind=kind)
        ]
        if ids and not self._holds_more(session, len(ids)):
            return session.forget_session()  # the session holds nothing else: one audited batch
        return sum(1 for episode_id in ids if session.forget(episode_id))

    # --- helpers ----------------------------------------------------------------------------------

    def _session(self, session_id: str) -> MemoryClient:
        if not isinstance(session_id, str) or not session_id.strip() or session_id != session_id.strip():
            raise ValueError("session_id must be a non-empty string without spaces around it")
        return self._client.for_session(session_id, "session")

    def _all(self, session: MemoryClient, *, status: str, kind: str) -> list[Any]:
        episodes: list[Any] = []
        cursor: str | None = None
        while True:
            page = session.list_episodes(status=status, limit=LIST_PAGE, cursor=cursor, kind=kind)
            episodes.extend(page["episodes"])
            cursor = page["next_cursor"]
            if cursor is None:
                return episodes

    def _holds_more(self, session: MemoryClient, count: int) -> bool:
        """Whether the session holds more than `count` episodes of any kind, reading no further
        than the page that says so (not every session of the bot)."""
        held = 0
        for status in STATUSES:
            cursor: str | None = None
            while True:
                page = session.list_episodes(status=status, limit=LIST_PAGE, cursor=cursor)
                held += len(page["episodes"])
                if held > count:
                    return True
                cursor = page["next_cursor"]
                if cursor is None:
                    break
        return False

    def _newest(self, session_id: str, kind: str | None, limit: int) -> list[MemoryRecord]:
        records: list[MemoryRecord] = []
        cursor: str | None = None
        while len(records) < limit:
            page = self._session(session_id).list_episodes(limit=min(LIST_PAGE, limit), cursor=cursor, kind=kind)
            for episode in page["episodes"]:
                record = _record(session_id, episode)
                if record is not None:
                    records.append(record)
            cursor = page["next_cursor"]
            if cursor is None:
                break
        return records


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _record(session_id: str, episode: Any) -> MemoryRecord | None:
    """A record from an episode of the API's answer (recalled or listed); None for an episode that
    is no jw-agents record (no kind of theirs: written to the session by something else)."""
    kind = episode.get("kind") or ""
    if kind not in KINDS:
        return None
    stamp = episode.get("timestamp")
    when = datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else datetime.fromtimestamp(0, timezone.utc)
    return MemoryRecord(
        session_id=session_id,
        timestamp=_utc(when),
        kind=cast(Kind, kind),
        content=episode["content"],
        metadata=dict(episode.get("metadata") or {}),
    )
