"""What gunicorn refuses itself, answered in the API's JSON error shape instead of gunicorn's HTML page.

gunicorn refuses a request line over `limit_request_line` (414), a header block over its limits
(431), a malformed request or chunk (400) and an unknown transfer coding (501) while it parses the
request, before it knows the path, so no Django middleware ever sees those requests. Its worker
writes the answer through `gunicorn.util.write_error`, for which gunicorn has no setting: the
`post_worker_init` hook in gunicorn_config.py replaces it in each worker with `write_json_error`.
Standard library and gunicorn only: this runs in gunicorn's processes, not in Django.
"""

from __future__ import annotations

import json
from typing import Any

from gunicorn import util

# The `code` of each refusal, by status (named as memconsole/api/errors.py names its codes).
ERROR_CODES = {
    400: "bad_request",
    403: "forbidden",
    414: "uri_too_long",
    417: "expectation_failed",
    431: "header_fields_too_large",
    500: "server_error",
    501: "not_implemented",
}


def json_error_response(status: int, reason: str, message: str) -> bytes:
    """The whole HTTP answer to a request gunicorn refuses: status line, headers and a JSON body."""
    text = f"{reason}: {message}" if message else reason
    body = json.dumps({"error": {"code": ERROR_CODES.get(status, "bad_request"), "message": text[:300]}})
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/json\r\n"
        "Cache-Control: no-store\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body.encode("ascii")


def write_json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """`gunicorn.util.write_error` with the same arguments and the same non-blocking write, in JSON."""
    util.write_nonblock(sock, json_error_response(status_int, reason, mesg))


def install() -> None:
    """Make this worker answer gunicorn's own refusals with `write_json_error`."""
    util.write_error = write_json_error
