from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.memory import jobs
from memconsole.memory.errors import NotFound
from memconsole.memory.management.progress import StderrProgress, stderr_of

from ...queue import stopped
from ...runner import execute
from ...worker import worker_id


class Command(BaseCommand):
    help = (
        "Finish a background job that was interrupted (its worker stopped too often) or failed: run it again "
        "here, in the foreground, with its progress on stderr. Exit 1 when it fails again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job_id", help="the job's id (on its page, and in the worker's log)")

    def handle(self, *args: Any, job_id: str, **options: Any) -> None:
        try:
            job = jobs.get(job_id)
        except NotFound:
            raise CommandError(f"no job {job_id}") from None
        if job.status == jobs.SUCCEEDED:
            self.stdout.write(f"job {job.pk} ({job.kind}) is already done")
            return
        if job.status == jobs.RUNNING and stopped(job) != (True, True):  # a worker known to be gone: finish it here
            raise CommandError(f"job {job.pk} is running (worker {job.worker}); wait for it or stop that worker")
        try:
            jobs.reopen(job)
        except jobs.JobBusy as exc:
            raise CommandError(f"another {exc.job.kind} job is active for this scope: {exc.job.pk}") from None
        with StderrProgress(stderr_of(self)) as bar:
            status = execute(job.pk, worker=worker_id("resume"), echo=bar)
        job.refresh_from_db()
        summary = (job.report or {}).get("summary", "")
        self.stdout.write(f"job {job.pk} ({job.kind}): {job.status}" + (f": {summary}" if summary else ""))
        if status != jobs.SUCCEEDED:
            raise CommandError(f"job {job.pk} {job.status}: {job.error or job.note}")
