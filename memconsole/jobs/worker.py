"""The worker loop: django-tasks-db's own `Worker` (the `db_worker` loop: claim the next task
under a lock, run it, record it), plus a recovery thread that resumes the jobs of workers that
stopped (`queue.recover`). Run by `manage.py jobs_worker`, or as a thread of the web process when
the vector index is embedded (`start_in_web`, from gunicorn_config.post_worker_init)."""

from __future__ import annotations

import logging
import os
import threading

from django.conf import settings
from django.db import DatabaseError, connection
from django_tasks import DEFAULT_TASK_BACKEND_ALIAS
from django_tasks.base import DEFAULT_TASK_QUEUE_NAME
from django_tasks.utils import get_random_id
from django_tasks_db.management.commands.db_worker import Worker

from memconsole.memory import checkpoints, indexer

from . import queue

log = logging.getLogger("memconsole.jobs")

_started_in_web = threading.Event()


def worker_id(kind: str = "worker") -> str:
    """ "<kind>:<host>:<pid>:<random>": `queue.worker_alive` reads the host and pid back."""
    return f"{kind}:{queue.this_host()}:{os.getpid()}:{get_random_id()[:8]}"


def make_worker(*, batch: bool = False, interval: float | None = None, ident: str | None = None) -> Worker:
    return Worker(
        queue_names=[DEFAULT_TASK_QUEUE_NAME],
        interval=float(settings.MEMCONSOLE_JOBS_POLL_SECONDS if interval is None else interval),
        batch=batch,
        backend_name=DEFAULT_TASK_BACKEND_ALIAS,
        startup_delay=False,
        max_tasks=None,
        worker_id=ident or worker_id(),
    )


class Recovery(threading.Thread):
    """Runs `queue.recover` now and then every half stale period, and takes an audit checkpoint
    when one is due (`checkpoints.take_if_due`)."""

    def __init__(self) -> None:
        super().__init__(name="job-recovery", daemon=True)
        self.every = max(
            1.0, min(settings.MEMCONSOLE_JOBS_STALE_SECONDS / 2, settings.MEMCONSOLE_AUDIT_CHECKPOINT_SECONDS)
        )
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while True:
                try:
                    queue.recover()
                except DatabaseError as exc:
                    log.warning("job recovery failed (retried): %s", exc)
                try:
                    checkpoints.take_if_due()
                except DatabaseError as exc:
                    log.warning("audit checkpoint failed (retried): %s", exc)
                if self.stopped.wait(self.every):
                    return
        finally:
            connection.close()


def start_indexer(*, in_worker: bool) -> bool:
    """Start this process's write-behind indexer thread (memory/indexer.py), which first drains what
    was left: in a web process with MEMCONSOLE_INDEXER=thread, in a job worker with `worker`."""
    if indexer.mode() != (indexer.WORKER if in_worker else indexer.THREAD):
        return False
    indexer.ensure_started()
    return True


def start_in_web() -> bool:
    """Start the write-behind indexer (MEMCONSOLE_INDEXER=thread), and the job worker as threads of
    this (single) web process when MEMCONSOLE_JOBS_IN_WEB is on; False when that is off or already
    started."""
    start_indexer(in_worker=False)
    if not settings.MEMCONSOLE_JOBS_IN_WEB or _started_in_web.is_set():
        return False
    _started_in_web.set()
    start_indexer(in_worker=True)
    Recovery().start()
    loop = make_worker(ident=worker_id("web"))
    threading.Thread(target=_run_forever, args=(loop,), name="job-worker", daemon=True).start()
    log.info("job worker started inside the web process (MEMCONSOLE_JOBS_IN_WEB)")
    return True


def _run_forever(loop: Worker) -> None:
    try:
        loop.run()
    except Exception:
        log.exception("the in-process job worker stopped")
    finally:
        connection.close()
