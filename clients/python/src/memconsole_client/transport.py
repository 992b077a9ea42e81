"""What the sync and async clients share: the requests each call sends, the retry policy, and how an
answer becomes a result or a `MemconsoleError`. Nothing here does I/O."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import ExceptionGroup  # type: ignore[import-not-found]  # anyio's dependency on 3.10

from .errors import MemconsoleError

__all__ = [
    "API_PREFIX",
    "USER_AGENT",
    "Call",
    "Retry",
    "answer",
    "api_url",
    "decode",
    "retry_after",
    "send_error",
    "timestamp",
    "transport_error",
    "url_problem",
]

API_PREFIX = "/api/v1"
USER_AGENT = "memconsole-client/0.1"


def api_url(base_url: str) -> str:
    """The API root for a server URL: "https://memory.example.org" -> ".../api/v1"."""
    url = base_url.rstrip("/")
    return url if url.endswith(API_PREFIX) else url + API_PREFIX


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a server's address (a bad port, no http:// or https://, no host), or None.

    Checked before a call is sent: httpx would otherwise raise InvalidURL, or fail only when it
    connects (OverflowError for a port above 65535, inside an ExceptionGroup with the async client).
    """
    try:
        parsed = httpx.URL(url)
        port = parsed.port
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        return str(exc) or "it cannot be parsed"
    if parsed.scheme not in ("http", "https"):
        return "it must start with http:// or https://"
    if not parsed.host:
        return "it names no host"
    if port is not None and not 0 < port <= 65535:
        return f"port {port} is not between 1 and 65535"
    return None


def timestamp(value: datetime | str | None) -> str | None:
    """A request's date-time as ISO-8601. A datetime without a time zone is UTC, as the server reads
    such a time (LangBot's rule), and is sent so: "2025-01-01T09:30:00+00:00"."""
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.isoformat()


@dataclass(frozen=True)
class Retry:
    """When to try a call again: on 429 (rate limited) and 503 (unavailable, but not its `permanent`
    codes), after the server's Retry-After but never sooner than an exponential backoff (`backoff`, then
    twice that, ...: a Retry-After of 0 or in the past does not retry at once), at most `attempts` more times and
    never waiting more than `budget` seconds in all for one call. A wait that would overrun the
    budget is not started: the error is raised at once, with its `retry_after`."""

    attempts: int = 3
    budget: float = 20.0
    backoff: float = 0.5
    statuses: frozenset[int] = field(default=frozenset({429, 503}))
    # 503s that waiting does not mend (docs/api.md): tampered rows, a missing encryption key.
    permanent: frozenset[str] = field(default=frozenset({"row_integrity", "encryption_key_missing"}))

    @classmethod
    def never(cls) -> Retry:
        return cls(attempts=0, budget=0.0)

    def delay(self, response: httpx.Response, retries: int, waited: float) -> float | None:
        """Seconds to wait before retry number `retries + 1`, or None to give up."""
        if response.status_code not in self.statuses or retries >= self.attempts:
            return None
        if error_code(response) in self.permanent:
            return None
        # The exponential backoff is also the floor: a Retry-After of 0 or a date already past
        # would otherwise retry at once, spending every attempt in the same instant.
        wait = max(retry_after(response) or 0, self.backoff * 2**retries)
        if waited + wait > self.budget:
            return None
        return float(wait)


def error_code(response: httpx.Response) -> str:
    """The API's `error.code` of an error answer, "" when it has none."""
    try:
        body = response.json()
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else ""


def retry_after(response: httpx.Response) -> int | None:
    """The Retry-After header in whole seconds (it may be a number or an HTTP date), or None."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    if value.isdigit():
        return int(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0, math.ceil((when - datetime.now(timezone.utc)).total_seconds()))


@dataclass(frozen=True)
class Call:
    """One API request: `fields` (None values dropped) go to the query string of a GET, else to a JSON body.
    `expects` names the keys its answer must hold, with their types (`answer` checks them)."""

    method: str
    endpoint: str
    fields: dict[str, Any]
    scope_fields: tuple[str, ...] = ("bot_uuid", "session_name", "isolation")  # what of the scope it sends
    expects: tuple[tuple[str, type | tuple[type, ...]], ...] = ()

    def request(
        self, client: httpx.Client | httpx.AsyncClient, api: str, token: str, scope: dict[str, str]
    ) -> httpx.Request:
        """The httpx request for this call (built by the pooled client, so its defaults apply)."""
        fields = {key: scope[key] for key in self.scope_fields if key in scope}
        fields.update({key: value for key, value in self.fields.items() if value is not None})
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        url = f"{api}/{self.endpoint}"
        if self.method == "GET":
            return client.build_request("GET", url, params=fields, headers=headers)
        try:
            body = json.dumps(fields, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except (ValueError, TypeError) as exc:  # NaN or infinity, or a value JSON has no form for
            raise MemconsoleError(0, "invalid", f"not sent: a value cannot be written as JSON ({exc})") from None
        headers["Content-Type"] = "application/json"
        return client.build_request(self.method, url, content=body, headers=headers)


def decode(response: httpx.Response) -> Any:
    """The JSON answer of a successful call; a `MemconsoleError` for an error status or a non-JSON answer."""
    if response.is_success:
        try:
            return response.json()
        except ValueError as exc:
            raise MemconsoleError(
                0, "bad_response", f"the server answered with something other than JSON: {exc}"
            ) from None
    wait = retry_after(response)
    try:
        error = response.json()["error"]
        return_error = MemconsoleError(
            response.status_code,
            error["code"],
            error["message"],
            error.get("field"),
            wait,
            current_version=_whole_number(error.get("current_version")),
        )
    except (ValueError, KeyError, TypeError):
        text = response.text.strip()[:200]
        return_error = MemconsoleError(
            response.status_code, "http_error", text or response.reason_phrase or "HTTP error", None, wait
        )
    raise return_error


def answer(call: Call, response: httpx.Response) -> Any:
    """`decode`, and a `MemconsoleError` when a successful answer lacks what the call's answer holds
    (`{}` from a proxy or another service at that address), rather than a KeyError later."""
    body = decode(response)
    if not isinstance(body, dict):
        missing = "JSON object"
    else:
        missing = next((repr(key) for key, kind in call.expects if not isinstance(body.get(key), kind)), "")
        if not missing:
            return body
    url = response.request.url.copy_with(query=None)
    raise MemconsoleError(
        response.status_code,
        "bad_response",
        f"unexpected answer from {url} (no {missing}): is this address a memconsole server?",
    )


def _whole_number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def transport_error(base_url: str, exc: httpx.TransportError) -> MemconsoleError:
    """The error for a call that never got an answer (refused, timed out, cut off)."""
    if isinstance(exc, httpx.UnsupportedProtocol):  # no http:// or https://
        return invalid_url(base_url, str(exc))
    kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
    return MemconsoleError(0, "unreachable", f"cannot reach {base_url} ({kind}): {exc or type(exc).__name__}")


def invalid_url(base_url: str, why: str) -> MemconsoleError:
    """The error for a server address no request can be sent to (status 0, code "invalid_url")."""
    return MemconsoleError(0, "invalid_url", f"{base_url!r} is not a valid server address ({why}): check the URL")


def send_error(base_url: str, exc: Exception) -> MemconsoleError | None:
    """The `MemconsoleError` for what sending a request raised below HTTP (the transport, the socket,
    a URL httpx or the OS refuses, or the async client's ExceptionGroup of them), or None for an
    exception that is no failure to send (a bug, which is not to be disguised)."""
    if isinstance(exc, ExceptionGroup):
        errors = (send_error(base_url, inner) for inner in exc.exceptions if isinstance(inner, Exception))
        return next((error for error in errors if error is not None), None)
    if isinstance(exc, httpx.TransportError):
        return transport_error(base_url, exc)
    if isinstance(exc, (httpx.InvalidURL, OverflowError)):  # connect() finds a port above 65535
        return invalid_url(base_url, str(exc) or type(exc).__name__)
    if isinstance(exc, (httpx.HTTPError, httpx.StreamError, OSError)):
        return MemconsoleError(0, "unreachable", f"cannot reach {base_url} (failed): {exc or type(exc).__name__}")
    return None
