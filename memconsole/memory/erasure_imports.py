"""The import files an erasure must not leave behind (docs/operations.md, "Jobs").

An import job keeps its uploaded file (a `JobInput`, in clear) while it is queued or running, and a
failed import that had committed part of its file keeps it for `resume_job`. Such a file may hold
the messages of the person being erased; run or resumed after the erasure, it would write them
back. So an erasure reads each import file of the bots it covers with the import's own parser
(`imports.people_in`):
- a file of an import still queued or running that names the person stops the erasure before
  anything is changed (`ValidationError` naming the job): erase them once that import has ended;
- a file kept by an ended import that names the person is deleted in the erasure's transaction,
  and the job says so; it can no longer be resumed (import the rest again from your own copy).
A kept file the parser can no longer read is treated as naming the person (deleted).

An import job's report names what it adjusted or skipped: a speaker profile by its id
("speaker:<id>", with the traits it left out), an episode by its id in the file. Those items of
the person (their profile, the episodes erased) are removed from every import report of the bots
the erasure covers (`scrub_reports`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from django.db.models import QuerySet

from . import imports
from .errors import ValidationError
from .job_models import ACTIVE, IMPORT, Job, JobInput

log = logging.getLogger("memconsole.memory")

DELETED_NOTE = (
    "its file was deleted by an erasure (it held the messages of the person erased); import the rest again "
    "from your own copy of the file"
)


@dataclass
class Held:
    """The import jobs whose files name the person: still active, and ended with a kept file."""

    active: list[Job] = field(default_factory=list)
    kept: list[Job] = field(default_factory=list)


def _with_files(bot_uuid: str) -> QuerySet[Job]:
    jobs = Job.objects.filter(kind=IMPORT, input__isnull=False).order_by("created_at")
    return jobs.filter(params__bot_uuid=bot_uuid) if bot_uuid else jobs


def holding(sender_id: str, bot_uuid: str) -> Held:
    """The import jobs of `bot_uuid` (every bot's for '') whose file names `sender_id`."""
    held = Held()
    for job in _with_files(bot_uuid):
        active = job.status in ACTIVE
        if _names(job, sender_id, unreadable=not active):
            (held.active if active else held.kept).append(job)
    return held


def refuse_active(held: Held) -> None:
    if held.active:
        ids = ", ".join(str(job.pk) for job in held.active)
        raise ValidationError(
            f"an import that holds this person's messages is queued or running (job {ids}); erase them again once "
            "it has ended, or it would write them back",
            field="sender_id",
        )


def delete_kept(held: Held) -> int:
    """Delete the kept files of `held.kept` (inside the erasure's transaction); how many went."""
    deleted = 0
    for job in held.kept:
        if JobInput.objects.filter(job_id=job.pk).delete()[0]:
            Job.objects.filter(pk=job.pk).update(note=DELETED_NOTE)
            deleted += 1
    return deleted


def _names(job: Job, sender_id: str, *, unreadable: bool) -> bool:
    """Whether the job's file names `sender_id`; `unreadable` is the answer for a file the parser refuses."""
    params = job.params
    row = JobInput.objects.filter(job_id=job.pk).first()
    if row is None:
        return False
    folder = tempfile.mkdtemp(prefix="memconsole-erasure-")
    try:
        path = Path(folder) / "upload"  # SQLite formats need a file (and may write -wal beside it)
        path.write_bytes(bytes(row.data))
        people = imports.people_in(
            path,
            str(params.get("format", "")),
            bot_uuid=str(params.get("bot_uuid", "")),
            session_name=params.get("session_name") or None,
            isolation=str(params.get("isolation", "session")),
        )
    except ValidationError as exc:
        log.warning("erasure: the file of import job %s cannot be read (%s)", job.pk, exc.message)
        return unreadable
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return sender_id in people


REPORT_ITEMS = ("warnings", "conflicts", "skipped")


def _items_of(report: object, wanted: set[str]) -> int:
    if not isinstance(report, dict):
        return 0
    return sum(
        1
        for name in REPORT_ITEMS
        for item in report.get(name) or []
        if isinstance(item, dict) and item.get("id") in wanted
    )


def reports_naming(sender_id: str, bot_uuid: str, old_ids: set[str]) -> list[Job]:
    """The import jobs (of `bot_uuid`, every bot's for '') whose report lists an item of the person:
    their speaker profile, or one of their episodes by its id in the file (`old_ids`)."""
    wanted = {f"speaker:{sender_id}", *old_ids}
    jobs = Job.objects.filter(kind=IMPORT, report__isnull=False).order_by("created_at")
    if bot_uuid:
        jobs = jobs.filter(params__bot_uuid=bot_uuid)
    return [job for job in jobs.iterator() if _items_of(job.report, wanted)]


def scrub_reports(jobs: list[Job], sender_id: str, old_ids: set[str], *, dry_run: bool) -> int:
    """Remove the person's items from these jobs' reports (inside the erasure's transaction); how
    many went (would go, in a dry run)."""
    wanted = {f"speaker:{sender_id}", *old_ids}
    removed = 0
    for job in jobs:
        report = dict(job.report or {})
        removed += _items_of(report, wanted)
        if dry_run:
            continue
        for name in REPORT_ITEMS:
            if isinstance(report.get(name), list):
                report[name] = [
                    item for item in report[name] if not (isinstance(item, dict) and item.get("id") in wanted)
                ]
        Job.objects.filter(pk=job.pk).update(report=report)
    return removed
