"""`MemoryClient`: the memory of one chat through one bot token, over a pooled httpx connection."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, cast

import httpx

from . import calls
from .base import BaseClient
from .transport import USER_AGENT, Call, answer, send_error
from .types import (
    Episode,
    EpisodeList,
    Fact,
    Injection,
    Message,
    MessageWindow,
    Profile,
    ProfileUpdate,
    RememberBatchResult,
    RememberResult,
    SessionSummary,
)

__all__ = ["MemoryClient"]


class MemoryClient(BaseClient[httpx.Client]):
    """The memory of one chat (bot_uuid + session_name + isolation) through one bot token.

    Calls share one pool of keep-alive connections (also with the clients `for_session` makes);
    close it with `close()` or use the client as a context manager. A 429 or 503 is retried after
    the server's Retry-After within `retry`'s budget (`Retry.never()` turns that off).
    """

    def _new_http(self, timeout: float) -> httpx.Client:
        return httpx.Client(timeout=timeout, headers={"User-Agent": USER_AGENT})

    def close(self) -> None:
        """Close the connection pool (unless it was passed in as `http_client`)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- calls ----------------------------------------------------------------------------------

    def remember(
        self,
        content: str,
        *,
        sender_id: str = "",
        sender_name: str = "",
        tags: list[str] | None = None,
        importance: int = 2,
        timestamp: datetime | str | None = None,
        query_id: str | None = None,
        kind: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> RememberResult:
        """Store an episode; returns {episode_id, status, superseded: [ids], indexed, importance, adjusted}.

        `importance` outside 1-5 is stored clamped (the answer's `importance`, and `adjusted` names it);
        a `timestamp` without a time zone is UTC; `query_id` names the message the memory came from;
        `kind` is a short label (e.g. "question") and `metadata` a JSON object, stored sealed.
        """
        call = calls.remember(
            content,
            sender_id=sender_id,
            sender_name=sender_name,
            tags=tags,
            importance=importance,
            timestamp_=timestamp,
            query_id=query_id,
            kind=kind,
            metadata=metadata,
        )
        return cast(RememberResult, self._send(call))

    def remember_many(self, episodes: Iterable[Mapping[str, Any] | str]) -> RememberBatchResult:
        """Store several episodes in one request, all or nothing; returns {episodes: [one answer per
        episode, as `remember`'s, in order], batch_id, indexed}.

        Each episode is a dict of `remember`'s keywords (`content`, `sender_id`, `sender_name`, `tags`,
        `importance`, `timestamp`, `query_id`, `kind`, `metadata`), or a string (its content). One invalid
        episode refuses the batch (422, `field` names it: "episodes[3].content") and nothing is stored; a
        correction supersedes an earlier episode of the same batch too. The server takes at most
        MEMCONSOLE_REMEMBER_BATCH_MAX episodes (256) a request, each counting against the rate limit.
        """
        return cast(RememberBatchResult, self._send(calls.remember_many(episodes)))

    def recall(
        self,
        query: str,
        *,
        top_k: int = 5,
        sender_id: str | None = None,
        importance_min: int | None = None,
        time_after: datetime | str | None = None,
        time_before: datetime | str | None = None,
        tags: list[str] | None = None,
        statuses: list[str] | None = None,
        speaker_id: str | None = None,
        kind: str | None = None,
    ) -> list[Episode]:
        """The best matching episodes, each with score and breakdown.

        `sender_id` keeps only that sender's episodes; `speaker_id` names the current speaker, whose
        own episodes are searched first and ranked first for a first-person question."""
        call = calls.recall(
            query,
            top_k=top_k,
            sender_id=sender_id,
            importance_min=importance_min,
            time_after=time_after,
            time_before=time_before,
            tags=tags,
            statuses=statuses,
            speaker_id=speaker_id,
            kind=kind,
        )
        return cast("list[Episode]", self._send(call)["episodes"])

    def get_profile(self, type: str = "session", sender_id: str = "") -> Profile:
        """A session profile, or a speaker's (type="speaker", sender_id=...); empty when none yet."""
        return cast(Profile, self._send(calls.get_profile(type, sender_id)))

    def update_profile(
        self,
        type: str = "session",
        sender_id: str = "",
        *,
        name: str | None = None,
        notes: str | None = None,
        add_traits: list[str] | None = None,
        remove_traits: list[str] | None = None,
        add_preferences: list[str] | None = None,
        remove_preferences: list[str] | None = None,
        append_notes: str | None = None,
        if_version: int | None = None,
    ) -> ProfileUpdate:
        """Change a profile; returns it after the change, with `evicted` and `adjusted`.

        `append_notes` adds a line to the notes without reading them first. With `if_version` (the
        `version` read; 0 for no profile yet) a profile changed since is left alone and the call raises
        `MemconsoleError` with code "conflict" and `current_version`.
        """
        call = calls.update_profile(
            type,
            sender_id,
            name=name,
            notes=notes,
            add_traits=add_traits,
            remove_traits=remove_traits,
            add_preferences=add_preferences,
            remove_preferences=remove_preferences,
            append_notes=append_notes,
            if_version=if_version,
        )
        return cast(ProfileUpdate, self._send(call))

    def list_episodes(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        kind: str | None = None,
    ) -> EpisodeList:
        """This chat's episodes of one status (default active), newest stored first; pass the answer's
        `next_cursor` as `cursor` for the next page."""
        return cast(EpisodeList, self._send(calls.list_episodes(status=status, limit=limit, cursor=cursor, kind=kind)))

    def export(self) -> dict[str, Any]:
        """This chat's memory as a memconsole export document (every status, profiles); audited."""
        return cast("dict[str, Any]", self._send(calls.export()))

    def remember_fact(self, subject: str, key: str, value: str) -> Fact:
        """Remember one fact (one per subject and key in this space; the old value is kept as history)."""
        return cast(Fact, self._send(calls.remember_fact(subject, key, value)))

    def recall_facts(self, subject: str, key: str | None = None) -> list[Fact]:
        """The current facts about `subject` (only `key`, when given)."""
        return cast("list[Fact]", self._send(calls.recall_facts(subject, key))["facts"])

    def forget_fact(self, subject: str, key: str) -> bool:
        """Forget one fact; `MemconsoleError` 404 when there is none."""
        return bool(self._send(calls.forget_fact(subject, key))["forgotten"])

    def append_message(
        self,
        role: str,
        content: str,
        *,
        sender_id: str | None = None,
        sender_name: str | None = None,
        created_at: datetime | str | None = None,
    ) -> Message:
        """Add a message (role user, assistant, system or tool) to this chat's conversation window."""
        call = calls.append_message(role, content, sender_id=sender_id, sender_name=sender_name, created_at=created_at)
        return cast(Message, self._send(call))

    def recent_messages(self, limit: int | None = None) -> MessageWindow:
        """The last `limit` messages of this chat's window (all it keeps by default), oldest first."""
        return cast(MessageWindow, self._send(calls.recent_messages(limit)))

    def list_sessions(self, limit: int | None = None) -> list[SessionSummary]:
        """This bot's sessions (its spaces), most recently used first, each with its episode count."""
        return cast("list[SessionSummary]", self._send(calls.list_sessions(limit))["sessions"])

    def forget_session(self) -> int:
        """Delete every episode written in this chat (one audited batch); returns how many."""
        return int(self._send(calls.forget_session())["count"])

    def forget(self, episode_id: str) -> bool:
        """Delete one episode of this chat's memory."""
        return bool(self._send(calls.forget(episode_id))["deleted"])

    def inject(
        self,
        query: str,
        *,
        sender_id: str = "",
        sender_name: str = "",
        query_id: str = "",
        top_k: int = 3,
        include_window: bool = False,
    ) -> Injection:
        """Memory for a prompt: {context, system_blocks, snapshot_id}; recorded as a snapshot. With
        `include_window`, `context["history"]` holds the chat's conversation window, oldest first."""
        call = calls.inject(
            query,
            sender_id=sender_id,
            sender_name=sender_name,
            query_id=query_id,
            top_k=top_k,
            include_window=include_window,
        )
        return cast(Injection, self._send(call))

    # --- transport ------------------------------------------------------------------------------

    def _send(self, call: Call) -> Any:
        retries, waited = 0, 0.0
        while True:
            request = self._request(call)
            try:
                response = self._http.send(request)
            except Exception as exc:  # an ExceptionGroup too: anyio's, around an async connect
                error = send_error(self.base_url, exc)
                if error is None:
                    raise
                raise error from None
            delay = self.retry.delay(response, retries, waited)
            if delay is None:
                return answer(call, response)
            time.sleep(delay)
            retries, waited = retries + 1, waited + delay
