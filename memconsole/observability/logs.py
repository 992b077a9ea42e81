"""Log records that carry the request id, and the JSON lines format (MEMCONSOLE_LOG_FORMAT=json).

Standard library only: gunicorn's master may load this module for its own log lines, and it must
not import Django or prometheus-client there (see gunicorn_config.py).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

NO_REQUEST = "-"
META_KEY = "HTTP_X_REQUEST_ID"  # request.META's name of the X-Request-ID header
# What an X-Request-ID from outside may be: short, and safe in a log line and a header.
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")

request_id: ContextVar[str] = ContextVar("memconsole_request_id", default=NO_REQUEST)

# Attributes every LogRecord has; anything else on a record came from `extra=` and is a field.
_RECORD_ATTRIBUTES = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}
# Django's request loggers pass the request object itself; its repr carries the query string.
_NOT_FIELDS = {"request", "request_id"}


def accepted_request_id(offered: str | None) -> str:
    """The caller's X-Request-ID when it is short and safe, else a new one."""
    if offered and REQUEST_ID.match(offered):
        return offered
    return uuid.uuid4().hex


class RequestIdFilter(logging.Filter):
    """Puts the current request's id (or "-") on every record as `request_id`.

    Django logs a request's 4xx/5xx ("Not Found: /x") after the middleware has returned; that
    record carries the request, whose X-Request-ID the middleware set to the id it used.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            current = request_id.get()
            if current == NO_REQUEST:
                current = getattr(getattr(record, "request", None), "META", {}).get(META_KEY) or NO_REQUEST
            record.request_id = current
        return True


def _field(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool | list | dict):
        return value
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC), level, logger, message, request_id, then any extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or request_id.get(),
        }
        for name, value in record.__dict__.items():
            if name not in _RECORD_ATTRIBUTES and name not in _NOT_FIELDS and not name.startswith("_"):
                entry.setdefault(name, _field(value))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)
