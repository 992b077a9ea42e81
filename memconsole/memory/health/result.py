"""What a health check answers: one `Check` per check id, and the `HealthResult` of a run."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DatabaseError
from django.utils.translation import gettext_noop

from memconsole.lib import vectors

from ..reports import OMIT, Report
from ..wording import Said

log = logging.getLogger("memconsole.health")

OK, WARN, ERROR = "OK", "WARN", "ERROR"
SEVERITY = {OK: 0, WARN: 1, ERROR: 2}
EXIT_CODES = {OK: 0, WARN: 1, ERROR: 2}

INDEX_FIX = gettext_noop(
    "Check the vector index: with embedded Chroma, that CHROMA_PATH exists and is writable by this process; "
    "with a Chroma server, that it runs at CHROMA_HOST:CHROMA_PORT and is reachable from here."
)
REINDEX_FIX = gettext_noop(
    "Run `python manage.py reindex` (it rebuilds the index from the database, which is the source of truth)."
)
DATABASE_FIX = gettext_noop("Check that the database named by DATABASE_URL is running and reachable.")


@dataclass
class Check(Report):
    """One check's finding. `detail` and `fix` are English (the CLI, /readyz, the stored run), and
    keep their words (`said`) for the console to say again in the reader's language: a `Said` its
    message and values. A plain text is kept as itself: the console translates it when it is a
    message of the catalogs, such as REINDEX_FIX, and shows it as it is otherwise."""

    id: str
    status: str
    detail: str | Said
    fix: str | Said = ""
    said: dict[str, Any] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        for name in ("detail", "fix"):
            value = getattr(self, name)
            if isinstance(value, Said):
                self.said[name] = value.stored()
                setattr(self, name, str(value))

    def json_fix(self) -> str:
        return str(self.fix) or OMIT

    def json_said(self) -> Any:
        return self.said or OMIT


@dataclass
class HealthResult(Report):
    """One run: `status` is the worst of its checks' (OK < WARN < ERROR)."""

    status: str
    checks: list[Check]
    checked_at: datetime
    duration_ms: int


def worst(statuses: list[str]) -> str:
    return max(statuses, key=SEVERITY.__getitem__, default=OK)


def safely(check_id: str, fn: Callable[..., Check], *args: Any) -> Check:
    """`fn(*args)`, or an ERROR check saying what it raised: a check that breaks is a finding,
    not a crash of the whole run."""
    try:
        return fn(*args)
    except Exception as exc:
        log.exception("health check %s raised", check_id)
        return failure(check_id, exc)


def failure(check_id: str, exc: Exception) -> Check:
    """The ERROR check of a check that could not run because of `exc`, with the fix its kind needs."""
    fix = ""
    if isinstance(exc, vectors.VectorIndexError):
        fix = INDEX_FIX
    elif isinstance(exc, DatabaseError):
        fix = DATABASE_FIX
    return Check(check_id, ERROR, f"the check could not run: {type(exc).__name__}: {exc}", fix)
