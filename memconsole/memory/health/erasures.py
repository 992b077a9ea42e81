"""The `erasure` check: an erasure whose vector-index part was interrupted (erasure_index.py)."""

from __future__ import annotations

from django.utils.translation import gettext_noop

from .. import erasure_index
from .result import ERROR, OK, Check


def check_unfinished_erasures() -> Check:
    pending = erasure_index.unfinished()
    if not pending:
        return Check("erasure", OK, gettext_noop("no erasure is unfinished"))
    described = "; ".join(
        f"{journal.subject_digest[:12]} (bot {journal.bot_uuid or '*'}, started {journal.started_at:%Y-%m-%d %H:%M} UTC, "
        f"{len(journal.user_keys)} collections left{', last error: ' + journal.last_error if journal.last_error else ''})"
        for journal in pending
    )
    return Check(
        "erasure",
        ERROR,
        f"{len(pending)} erasures were interrupted after their database part: the vector index may still hold "
        f"the person's vectors and metadata: {described}",
        f"Run `{erasure_index.RESUME_COMMAND}` (or the same erasure again) to finish them.",
    )
