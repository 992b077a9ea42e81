"""Putting jobs on django-tasks' queue: `submit` (what a face calls to start a job) and `recover`
(what every worker runs at start and then periodically: jobs whose worker stopped are resumed, or
reported as interrupted after `jobs.MAX_ATTEMPTS`)."""

from __future__ import annotations

import logging
import os
import socket
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django_tasks.base import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from memconsole.memory import jobs
from memconsole.memory.audit import Actor

from .tasks import run_job

log = logging.getLogger("memconsole.jobs")

LOST_AFTER = timedelta(seconds=60)  # a queued job with no live task this long is enqueued again


def enqueue(job: jobs.Job) -> None:
    result = run_job.enqueue(str(job.pk))
    jobs.set_task(job, result.id)


def submit(
    kind: str,
    *,
    scope: str,
    bot_uuid: str,
    actor: Actor,
    params: dict[str, Any],
    data: bytes | None = None,
    file_name: str = "",
) -> jobs.Job:
    """Store a job and queue it (after the surrounding transaction commits); `jobs.JobBusy` when one
    of its kind is already active for `scope`."""
    job = jobs.create(kind, scope=scope, bot_uuid=bot_uuid, actor=actor, params=params, data=data, file_name=file_name)
    transaction.on_commit(lambda: enqueue(job))
    return job


def _retire_task(task_id: str) -> None:
    """The task of a job whose worker died stays RUNNING in django-tasks' table: close it."""
    if task_id:
        DBTaskResult.objects.filter(id=task_id, status=TaskResultStatus.RUNNING).update(
            status=TaskResultStatus.FAILED,
            finished_at=timezone.now(),
            exception_class_path="memconsole.jobs.WorkerStopped",
            traceback="the worker running this task stopped (the job was resumed or marked interrupted)",
        )


def this_host() -> str:
    return socket.gethostname()[:24].replace(":", "-")


def worker_alive(worker: str) -> bool | None:
    """Whether the worker process named `worker` ("<kind>:<host>:<pid>:<random>", worker.worker_id)
    is alive, when it ran on this machine; None when that cannot be told from here. On SQLite (one
    machine) this is what decides: a job inside a long write transaction cannot write its
    heartbeat, but its process is alive."""
    parts = worker.split(":")
    if len(parts) != 4 or parts[1] != this_host() or not parts[2].isdigit():
        return None
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stopped(job: jobs.Job) -> tuple[bool, bool]:
    """(whether the running job's worker stopped, whether that is known rather than inferred)."""
    alive = worker_alive(job.worker)
    if alive is False:
        return True, True
    if alive is True:  # a live process; a reused pid still stops reporting at some point
        return jobs.is_stale(job, factor=10), False
    return jobs.is_stale(job), False


def recover() -> list[str]:
    """Resume (or mark interrupted) every job whose worker stopped; returns what was done, per job."""
    done = []
    for job in jobs.running():
        gone, known = stopped(job)
        if not gone:
            continue
        old_task = job.task_id
        if jobs.requeue(job, worker_dead=known):
            _retire_task(old_task)
            enqueue(job)
            done.append(f"{job.pk}: resumed")
        elif job.status == jobs.INTERRUPTED:
            _retire_task(old_task)
            done.append(f"{job.pk}: interrupted")
    lost_before = timezone.now() - LOST_AFTER
    live = DBTaskResult.objects.filter(status__in=[TaskResultStatus.READY, TaskResultStatus.RUNNING])
    for job in jobs.Job.objects.filter(status=jobs.QUEUED, created_at__lt=lost_before):
        if not job.task_id or not live.filter(id=job.task_id).exists():
            enqueue(job)
            done.append(f"{job.pk}: queued again")
    for line in done:
        log.warning("job %s", line)
    return done
