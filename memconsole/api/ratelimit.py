"""Per-token rate limit: a fixed window of one clock minute, counted in the database.

MEMCONSOLE_API_RATE_PER_MINUTE requests per token per minute (every authenticated request counts,
whatever its outcome). The counter is a `RateWindow` row, so gunicorn workers and separate
machines that share the database share the limit; the row update takes a row lock, so concurrent
requests never lose a count. A request over the limit gets 429 with Retry-After (seconds to the
next minute). `TokenThrottle` is the limit as a ninja throttle; it runs after authentication.
A batch counts as many requests as it holds episodes: the throttle counted the request, `charge`
adds the rest, only when they all fit in the minute (a refused batch adds nothing more).
"""

from __future__ import annotations

import math
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.http import HttpRequest
from django.utils import timezone
from ninja.throttling import BaseThrottle

from memconsole.memory.models import BotToken

from .models import RateWindow

TABLE = "api_ratewindow"  # RateWindow's table (api/models.py), counted in raw SQL by `_add`


def hit(token: BotToken) -> int | None:
    """Count one request; None when it is within the limit, else the seconds to wait."""
    now = timezone.now()
    window = now.replace(second=0, microsecond=0)
    count = _add(token, window, 1)
    if count is None:  # the token's first request this minute: open the window
        with transaction.atomic():
            RateWindow.objects.filter(token=token, window__lt=window).delete()
            try:
                with transaction.atomic():
                    RateWindow.objects.create(token=token, window=window, count=1)
                count = 1
            except IntegrityError:  # another worker opened the window first
                count = _add(token, window, 1) or 0
            # last_used_at is kept to the minute: one write per token per minute, not per request.
            BotToken.objects.filter(pk=token.pk).update(last_used_at=now)
    if count <= settings.MEMCONSOLE_API_RATE_PER_MINUTE:
        return None
    return _wait(now)


def _add(token: BotToken, window: datetime, by: int) -> int | None:
    """Add `by` to the token's count in `window` and return the new count, in one statement (its row
    lock keeps concurrent requests from losing a count); None when the window has no row yet."""
    quote = connection.ops.quote_name
    table, count = quote(TABLE), quote("count")
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {count} = {count} + %s WHERE {quote('token_id')} = %s AND {quote('window')} = %s "
            f"RETURNING {count}",
            [by, token.pk, connection.ops.adapt_datetimefield_value(window)],
        )
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def _wait(now: datetime) -> int:
    window = now.replace(second=0, microsecond=0)
    return max(1, math.ceil((window + timedelta(minutes=1) - now).total_seconds()))


def charge(token: BotToken, extra: int) -> int | None:
    """Count `extra` more requests in this minute (after `hit` counted the request itself), if all of
    them fit within the limit: None when counted, else the seconds to wait (nothing was added)."""
    if extra <= 0:
        return None
    now = timezone.now()
    window = now.replace(second=0, microsecond=0)
    allowed = settings.MEMCONSOLE_API_RATE_PER_MINUTE - extra
    rows = RateWindow.objects.filter(token=token, window=window)
    with transaction.atomic():
        if rows.filter(count__lte=allowed).update(count=F("count") + extra):
            return None
        if allowed >= 0 and not rows.exists():  # the minute turned since `hit`: open it
            try:
                with transaction.atomic():
                    RateWindow.objects.create(token=token, window=window, count=extra)
                return None
            except IntegrityError:  # another request opened it first
                if rows.filter(count__lte=allowed).update(count=F("count") + extra):
                    return None
    return _wait(now)


class TokenThrottle(BaseThrottle):
    """The per-token limit for ninja: `request.auth` is the BotToken that BearerToken found."""

    def __init__(self) -> None:
        self._last = threading.local()  # wait() follows allow_request() in the same request's thread

    def allow_request(self, request: HttpRequest) -> bool:
        self._last.wait = hit(request.auth)  # type: ignore[attr-defined]  # set by ninja's auth step
        return self._last.wait is None

    def wait(self) -> float | None:
        return getattr(self._last, "wait", None)
