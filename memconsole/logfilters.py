"""Filters for the log records Django writes about requests (settings.LOGGING)."""

from __future__ import annotations

import logging


class OneLineForbidden(logging.Filter):
    """A refused request (403) is logged as its one line ("Forbidden (Permission denied): /import/").

    Django logs a view's PermissionDenied on `django.request` at WARNING with the exception attached,
    so every too-low role or hostile probe wrote a full traceback; the refusal is expected, the stack
    says nothing. Other statuses keep their traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
