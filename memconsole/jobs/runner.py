"""Running one job in a worker: claim it, keep its heartbeat, call the domain, record the end."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import DatabaseError, connection
from django.utils.translation import gettext_noop

from memconsole.memory import jobkinds, jobs
from memconsole.memory.errors import MemoryError_, PermissionDenied, ValidationError
from memconsole.memory.wording import Said, said

log = logging.getLogger("memconsole.jobs")

Echo = Callable[[str, int, int | None], None]


class Heartbeat(threading.Thread):
    """Writes the running job's heartbeat every few seconds from its own connection, so that a job
    busy in one long step is not taken for one whose worker died; a failed beat is retried at the
    next. Not on SQLite (`needed`): there every worker is on this one machine, where recovery asks
    whether the worker's process is alive (`queue.worker_alive`), and a second writer in the
    worker's own process would only compete with the job's writes for the database's one lock."""

    @staticmethod
    def needed() -> bool:
        return connection.vendor != "sqlite"

    def __init__(self, job_id: object) -> None:
        super().__init__(name=f"job-heartbeat-{job_id}", daemon=True)
        self.job_id = job_id
        self.every = max(1.0, min(10.0, jobs.stale_after().total_seconds() / 4))
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(self.every):
                try:
                    jobs.heartbeat(self.job_id)
                except DatabaseError as exc:
                    log.warning("job %s: heartbeat not written: %s", self.job_id, exc)
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


def plain_error(exc: BaseException) -> str | Said:
    """What went wrong, in words for the job page (the traceback goes to the log)."""
    if isinstance(exc, ValidationError):
        return exc.said or exc.message
    if isinstance(exc, PermissionDenied):
        return said(gettext_noop("the account that started this job may not use this bot's memory"))
    if isinstance(exc, MemoryError_):
        return str(exc)
    return said(
        gettext_noop("unexpected error (%(error)s); the worker's log has the details"),
        error=f"{type(exc).__name__}: {exc}",
    )


def execute(job_id: object, *, worker: str, echo: Echo | None = None) -> str:
    """Run a queued job to its end and return its final status ('skipped' when it was not queued)."""
    job = jobs.claim(job_id, worker)
    if job is None:
        return "skipped"
    log.info("job %s (%s) started by %s, attempt %s", job.pk, job.kind, worker, job.attempts)
    beat = Heartbeat(job.pk)
    if Heartbeat.needed():
        beat.start()
    try:
        report = jobkinds.run(job, jobs.Progress(job, echo))
    except Exception as exc:
        if not isinstance(exc, MemoryError_):
            log.exception("job %s (%s) failed", job.pk, job.kind)
        jobs.fail(job, plain_error(exc))
    else:
        jobs.finish(job, report)
    finally:
        if beat.is_alive():
            beat.stop()
    log.info("job %s (%s) %s", job.pk, job.kind, job.status)
    return job.status
