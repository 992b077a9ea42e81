"""The `index_backlog` check: vectors waiting for the write-behind indexer (memory/indexer.py)."""

from __future__ import annotations

from django.conf import settings
from django.utils.translation import gettext_noop

from .. import indexer, pending
from ..wording import said
from .result import OK, WARN, Check

# Waiting longer than this many times the configured delay (and at least a minute) means nothing drains it.
LATE_FACTOR = 50
LATE_MIN_SECONDS = 60.0


def late_after() -> float:
    return max(LATE_MIN_SECONDS, LATE_FACTOR * indexer.delay_seconds())


def check_index_backlog() -> Check:
    waiting = pending.backlog()
    mode = settings.MEMCONSOLE_INDEXER
    detail = f"{waiting.describe()} (MEMCONSOLE_INDEXER={mode}, MEMCONSOLE_INDEX_DELAY_MS={settings.MEMCONSOLE_INDEX_DELAY_MS})"
    if waiting.count and waiting.oldest_seconds > late_after():
        who = (
            "the job worker (`manage.py jobs_worker`)" if mode == indexer.WORKER else "the web server's indexer thread"
        )
        return Check(
            "index_backlog",
            WARN,
            f"{detail}: they are found by recall, but nothing has written them into the index for "
            f"{waiting.oldest_seconds:.0f} s",
            f"Check that {who} runs and that the vector index is reachable (see the vector_index check); "
            "`python manage.py reindex` writes them now.",
        )
    if not waiting.count:  # the usual answer, in the reader's language in the console
        idle = gettext_noop(
            "no vector is waiting for the index (MEMCONSOLE_INDEXER=%(mode)s, MEMCONSOLE_INDEX_DELAY_MS=%(delay)s)"
        )
        return Check("index_backlog", OK, said(idle, mode=mode, delay=settings.MEMCONSOLE_INDEX_DELAY_MS))
    return Check("index_backlog", OK, detail)
