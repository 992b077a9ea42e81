"""The one exception the clients raise for a failed call."""

from __future__ import annotations

__all__ = ["MemconsoleError"]


class MemconsoleError(Exception):
    """An API call failed. `status` is the HTTP status (0 when the server could not be reached, or
    the call was not sent: code "invalid" for a value JSON cannot carry, such as NaN),
    `code` the API's error code (e.g. "invalid", "rate_limited"), `field` the offending input and
    `retry_after` the seconds the server asked to wait (429 and 503).

    A profile update whose `if_version` is stale fails with status 409, code "conflict" and
    `current_version`, the version stored now: read the profile again, re-apply, send that version.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        retry_after: int | None = None,
        *,
        current_version: int | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}" + (f" ({field})" if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after
        self.current_version = current_version  # only on a 409 conflict
