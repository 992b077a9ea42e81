"""What `MemoryClient` and `AsyncMemoryClient` share: the chat they speak for, the token, timeout
and retry policy, the pooled httpx client they send through, `for_session`, and the request for a
call. Only sending differs (blocking or awaited); each call's request is described in `calls.py`."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import httpx

from .errors import MemconsoleError
from .transport import Call, Retry, api_url, invalid_url, url_problem

__all__ = ["BaseClient"]

HttpT = TypeVar("HttpT", httpx.Client, httpx.AsyncClient)
ClientT = TypeVar("ClientT", bound="BaseClient[Any]")


class BaseClient(Generic[HttpT]):
    """The memory of one chat (bot_uuid + session_name + isolation) through one bot token, over
    `HttpT` (a new pool unless `http_client` is given; only a pool made here is closed here)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        bot_uuid: str,
        session_name: str,
        isolation: str = "session",
        timeout: float = 10.0,
        *,
        retry: Retry | None = None,
        http_client: HttpT | None = None,
    ) -> None:
        self.base_url = api_url(base_url)
        # A bad address fails each call with a MemconsoleError (not at construction, which may sit
        # in a bot's start-up code that is not ready for it).
        problem = url_problem(self.base_url)
        self._url_error: MemconsoleError | None = invalid_url(base_url, problem) if problem else None
        if not isinstance(token, str) or not token or not token.isascii() or not token.isprintable() or " " in token:
            # An HTTP header carries ASCII only: a character pasted with the token fails every call.
            raise ValueError("token must be the bot token as memconsole showed it (printable ASCII, no spaces)")
        self.token = token
        self.bot_uuid = bot_uuid
        self.session_name = session_name
        self.isolation = isolation
        self.timeout = timeout
        self.retry = retry if retry is not None else Retry()
        self._owns_http = http_client is None
        self._http: HttpT = http_client if http_client is not None else self._new_http(timeout)

    def _new_http(self, timeout: float) -> HttpT:
        """A new connection pool (the subclass's kind of httpx client)."""
        raise NotImplementedError

    @property
    def http_client(self) -> HttpT:
        """The httpx client (and its connection pool) this client sends through."""
        return self._http

    def for_session(self: ClientT, session_name: str, isolation: str | None = None) -> ClientT:
        """The same bot and token, another chat (sharing this client's connections)."""
        return type(self)(
            self.base_url,
            self.token,
            self.bot_uuid,
            session_name,
            isolation or self.isolation,
            self.timeout,
            retry=self.retry,
            http_client=self._http,
        )

    def _scope(self) -> dict[str, str]:
        return {"bot_uuid": self.bot_uuid, "session_name": self.session_name, "isolation": self.isolation}

    def _request(self, call: Call) -> httpx.Request:
        if self._url_error is not None:
            raise self._url_error
        return call.request(self._http, self.base_url, self.token, self._scope())
