"""A small client for the memconsole bot API, standard library only (docs/api.md).

    from memconsole.client import MemoryClient, MemconsoleError

    memory = MemoryClient("https://memory.example.org", token, bot_uuid="bot-1", session_name="group_123")
    memory.remember("Alice lives in Paris", sender_id="u1", sender_name="Alice", tags=["fact"])
    hits = memory.recall("where does Alice live?")
    injection = memory.inject("where does Alice live?", sender_id="u1", sender_name="Alice")

This file does not import Django: copy it into a bot as it is.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from typing import Any

__all__ = ["MemoryClient", "MemconsoleError"]


class MemconsoleError(Exception):
    """An API call failed. `status` is the HTTP status (0 when the server could not be reached),
    `code` the API's error code (e.g. "invalid", "rate_limited"), `field` the offending input."""

    def __init__(
        self, status: int, code: str, message: str, field: str | None = None, retry_after: int | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}" + (f" ({field})" if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after


def _timestamp(value: datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError("timestamps must carry a time zone (e.g. datetime.now(timezone.utc))")
    return value.isoformat()


class MemoryClient:
    """The memory of one chat (bot_uuid + session_name + isolation) through one bot token."""

    def __init__(
        self,
        base_url: str,
        token: str,
        bot_uuid: str,
        session_name: str,
        isolation: str = "session",
        timeout: float = 10.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/api/v1"):
            self.base_url += "/api/v1"
        self.token = token
        self.bot_uuid = bot_uuid
        self.session_name = session_name
        self.isolation = isolation
        self.timeout = timeout

    def for_session(self, session_name: str, isolation: str | None = None) -> MemoryClient:
        """The same bot and token, another chat."""
        return MemoryClient(
            self.base_url, self.token, self.bot_uuid, session_name, isolation or self.isolation, self.timeout
        )

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
    ) -> dict[str, Any]:
        """Store an episode; returns {episode_id, status, superseded: [ids], indexed}."""
        body = {
            "content": content,
            "sender_id": sender_id,
            "sender_name": sender_name,
            "tags": tags or [],
            "importance": importance,
            "timestamp": _timestamp(timestamp),
        }
        return self._call("POST", "remember", body)

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
    ) -> list[dict[str, Any]]:
        """The best matching episodes, each with score and breakdown."""
        body = {
            "query": query,
            "top_k": top_k,
            "sender_id": sender_id,
            "importance_min": importance_min,
            "time_after": _timestamp(time_after),
            "time_before": _timestamp(time_before),
            "tags": tags,
            "statuses": statuses,
        }
        return self._call("POST", "recall", body)["episodes"]

    def get_profile(self, type: str = "session", sender_id: str = "") -> dict[str, Any]:
        """A session profile, or a speaker's (type="speaker", sender_id=...); empty when none yet."""
        params = {"type": type, "sender_id": sender_id} if sender_id else {"type": type}
        return self._call("GET", "profile", params)

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
    ) -> dict[str, Any]:
        """Change a profile; returns it after the change."""
        changes = {key: value for key, value in {"name": name, "notes": notes}.items() if value is not None}
        body = {
            "type": type,
            "sender_id": sender_id,
            "set": changes,
            "add_traits": add_traits,
            "remove_traits": remove_traits,
            "add_preferences": add_preferences,
            "remove_preferences": remove_preferences,
        }
        return self._call("POST", "profile", body)

    def forget(self, episode_id: str) -> bool:
        """Delete one episode of this chat's memory."""
        return bool(self._call("POST", "forget", {"episode_id": episode_id})["deleted"])

    def inject(
        self, query: str, *, sender_id: str = "", sender_name: str = "", query_id: str = "", top_k: int = 3
    ) -> dict[str, Any]:
        """Memory for a prompt: {context, system_blocks, snapshot_id}; recorded as a snapshot."""
        body = {
            "query": query,
            "query_id": query_id,
            "sender_id": sender_id,
            "sender_name": sender_name,
            "top_k": top_k,
        }
        return self._call("POST", "inject", body)

    # --- transport ------------------------------------------------------------------------------

    def _scope(self) -> dict[str, str]:
        return {"bot_uuid": self.bot_uuid, "session_name": self.session_name, "isolation": self.isolation}

    def _call(self, method: str, endpoint: str, fields: dict[str, Any]) -> dict[str, Any]:
        fields = {key: value for key, value in fields.items() if value is not None}
        url = f"{self.base_url}/{endpoint}"
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if method == "GET":
            url += "?" + urllib.parse.urlencode({**self._scope(), **fields})
        else:
            data = json.dumps({**self._scope(), **fields}, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise self._error(exc) from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise MemconsoleError(0, "unreachable", f"cannot reach {self.base_url}: {exc}") from None
        except ValueError as exc:
            raise MemconsoleError(
                0, "bad_response", f"the server answered with something other than JSON: {exc}"
            ) from None

    @staticmethod
    def _error(exc: urllib.error.HTTPError) -> MemconsoleError:
        raw = exc.read()
        retry = exc.headers.get("Retry-After")
        retry_after = int(retry) if retry and retry.isdigit() else None
        try:
            error = json.loads(raw.decode("utf-8"))["error"]
            return MemconsoleError(exc.code, error["code"], error["message"], error.get("field"), retry_after)
        except (ValueError, KeyError, TypeError):
            text = raw.decode("utf-8", "replace").strip()[:200]
            return MemconsoleError(exc.code, "http_error", text or exc.reason or "HTTP error", None, retry_after)
