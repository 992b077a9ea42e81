"""Background jobs, the domain side (docs/design.md §1, docs/operations.md "Jobs"): the `Job` row
that says what runs, for whom, how far it has got and how it ended. No queue library here: the
worker wiring (django-tasks) is `memconsole/jobs`, which calls `claim`, `Progress`, `finish`,
`fail` and `stale` below; the work itself is `jobkinds.run`.

Rules kept here, in the database:
- At most one active (queued or running) job per kind and scope: a conditional unique constraint,
  so two requests at the same moment cannot both start one; `create` raises `JobBusy` naming the
  job already active.
- A running job writes a heartbeat (its progress, and the worker's heartbeat thread); a job whose
  heartbeat is older than MEMCONSOLE_JOBS_STALE_SECONDS lost its worker (killed, machine gone) and
  is `requeue`d (resumed) up to MAX_ATTEMPTS times, then marked interrupted with the command that
  finishes it (`resume_command`). The requeue is a conditional update: a job that wrote a
  heartbeat meanwhile is left alone.
- A batched import records its checkpoint on the row inside each batch's transaction
  (`Checkpoint`), so a resumed attempt continues after the last committed batch.
- Inputs are stored with the job (`params`, and `JobInput` for an uploaded file) so that any worker
  on any machine can run it; what names a person (an erasure's sender id) is removed from the row
  when the job ends.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import Count, Q
from django.utils import timezone

from .audit import Actor
from .errors import MemoryError_, NotFound
from .job_models import (
    ACTIVE,
    BULK,
    ERASURE,
    FAILED,
    HEALTH,
    IMPORT,
    INTERRUPTED,
    KIND_LABELS,
    QUEUED,
    REEMBED,
    REINDEX,
    ROTATION,
    RUNNING,
    STATUS_LABELS,
    SUCCEEDED,
    Job,
    JobInput,
)
from .wording import Said, in_language

__all__ = [
    "ACTIVE",
    "BULK",
    "ERASURE",
    "FAILED",
    "HEALTH",
    "IMPORT",
    "INTERRUPTED",
    "KIND_LABELS",
    "QUEUED",
    "REEMBED",
    "REINDEX",
    "ROTATION",
    "RUNNING",
    "STATUS_LABELS",
    "SUCCEEDED",
    "Job",
    "JobBusy",
    "JobInput",
    "PartialImport",
    "Progress",
]

MAX_ATTEMPTS = 3
PROGRESS_EVERY = 0.5  # seconds between two progress writes (the last one of a stage is always written)
PRIVATE_PARAMS = ("sender_id",)  # removed from the row when the job ends
CHECKPOINT = "checkpoint"  # a batched import's progress (`Checkpoint`), removed when it succeeds
ERROR_SAID = "error_said"  # a failed job's report: its error's words (`wording.Said.stored()`)


class JobBusy(MemoryError_):
    """A job of this kind is already queued or running for this scope; `job` is that job."""

    def __init__(self, job: Job) -> None:
        super().__init__(f"a {job.kind} job is already {job.status} for this scope ({job.pk})")
        self.job = job


def actor_of(job: Job) -> Actor:
    """The actor who asked for the job (its bots limit included), for the work and its audit."""
    bots = job.actor.get("bot_uuids")
    return Actor(
        job.actor.get("type", "system"), job.actor.get("name", "job"), frozenset(bots) if bots is not None else None
    )


def create(
    kind: str,
    *,
    scope: str,
    bot_uuid: str,
    actor: Actor,
    params: dict[str, Any],
    data: bytes | None = None,
    file_name: str = "",
) -> Job:
    """A new queued job; `JobBusy` when one of this kind is already active for `scope`."""
    if kind not in KIND_LABELS:
        raise ValueError(f"unknown job kind {kind!r}")
    actor_data = {
        "type": actor.type,
        "name": actor.name,
        "bot_uuids": sorted(actor.bot_uuids) if actor.bot_uuids is not None else None,
    }
    try:
        with transaction.atomic():
            job = Job.objects.create(kind=kind, scope=scope, bot_uuid=bot_uuid, actor=actor_data, params=params)
            if data is not None:
                JobInput.objects.create(job=job, name=file_name, data=data)
    except IntegrityError:
        busy = active(kind, scope)
        if busy is None:  # it ended in between: try once more
            return create(
                kind, scope=scope, bot_uuid=bot_uuid, actor=actor, params=params, data=data, file_name=file_name
            )
        raise JobBusy(busy) from None
    return job


def active(kind: str, scope: str) -> Job | None:
    """The job of this kind queued or running for `scope`, if any (at most one: a constraint)."""
    return Job.objects.filter(kind=kind, scope=scope, status__in=ACTIVE).first()


def require_none_active(kind: str, scope: str) -> None:
    """`JobBusy` when a job of this kind is queued or running for `scope` (work done at once that
    must not run beside it)."""
    busy = active(kind, scope)
    if busy is not None:
        raise JobBusy(busy)


def get(job_id: Any) -> Job:
    try:
        return Job.objects.get(pk=job_id)
    except (Job.DoesNotExist, DjangoValidationError, ValueError, TypeError) as exc:  # not a job id at all too
        raise NotFound("no such job") from exc


def get_for(job_id: Any, actor: Actor) -> Job:
    """The job if `actor` may see it: an actor limited to some bots sees those bots' jobs and its own."""
    job = get(job_id)
    own = job.actor.get("type") == actor.type and job.actor.get("name") == actor.name
    if actor.bot_uuids is not None and not own and (not job.bot_uuid or job.bot_uuid not in actor.bot_uuids):
        raise NotFound("no such job")
    return job


def recent_for(actor: Actor, limit: int = 20) -> list[Job]:
    """The newest jobs `actor` may see (`get_for`): all, or those of its bots and its own."""
    jobs = Job.objects.all()
    if actor.bot_uuids is not None:
        own = Q(actor__type=actor.type, actor__name=actor.name)
        jobs = jobs.filter((Q(bot_uuid__in=sorted(actor.bot_uuids)) & ~Q(bot_uuid="")) | own)
    return list(jobs.order_by("-created_at")[:limit])


def set_task(job: Job, task_id: str) -> None:
    Job.objects.filter(pk=job.pk).update(task_id=task_id)
    job.task_id = task_id


def claim(job_id: Any, worker: str) -> Job | None:
    """Mark a queued job running for `worker`; None when it is not queued (already run, cancelled)."""
    now = timezone.now()
    claimed = Job.objects.filter(pk=job_id, status=QUEUED).update(
        status=RUNNING,
        worker=worker[:128],
        started_at=now,
        heartbeat_at=now,
        attempts=models.F("attempts") + 1,
        stage="",
        done=0,
        total=None,
        stage_started_at=now,
    )
    return Job.objects.get(pk=job_id) if claimed else None


def input_of(job: Job) -> tuple[str, bytes]:
    """(name, bytes) of the job's uploaded file; `MemoryError_` when it is gone (why: the job's note)."""
    row = JobInput.objects.filter(job=job).first()
    if row is None:
        raise MemoryError_(f"this job's file is no longer kept: {job.note or 'it was deleted'}")
    return row.name, bytes(row.data)


class Progress:
    """The callback the domain's long operations take, `progress(stage, done, total)`: it writes
    the job's counts (at most every PROGRESS_EVERY seconds, and always at the end of a stage) and
    its heartbeat. Inside a domain transaction the write joins that transaction (the same
    connection), so it never waits for the database's write lock."""

    def __init__(self, job: Job, echo: Any = None) -> None:
        self.job = job
        self.echo = echo  # a second callback (a command's progress bar), or None
        self._written = 0.0

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        job, now = self.job, timezone.now()
        fields: dict[str, Any] = {"done": done, "total": total, "heartbeat_at": now}
        if stage != job.stage:
            job.stage, job.stage_started_at = stage[:32], now
            fields.update(stage=job.stage, stage_started_at=now)
        job.done, job.total, job.heartbeat_at = done, total, now
        if self.echo is not None:
            self.echo(stage, done, total)
        moment = time.monotonic()
        if "stage" in fields or done == total or moment - self._written >= PROGRESS_EVERY:
            self._written = moment
            Job.objects.filter(pk=job.pk, status=RUNNING).update(**fields)


class Checkpoint:
    """How far a batched import has got (`imports.writer.Checkpoint`), kept in the job's
    `params["checkpoint"]`: `save` runs inside each batch's transaction, so the row says exactly
    what is committed, and a resumed attempt reads it back. Dropped when the job succeeds."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.state: dict[str, Any] = dict(job.params.get(CHECKPOINT) or {})

    def save(self, state: dict[str, Any]) -> None:
        saved = dict(state)
        Job.objects.filter(pk=self.job.pk).update(params={**self.job.params, CHECKPOINT: saved})

        def committed() -> None:  # a batch rolled back leaves the last committed state in hand
            self.state = saved
            self.job.params = {**self.job.params, CHECKPOINT: saved}

        transaction.on_commit(committed)


class PartialImport(MemoryError_):
    """An import job stopped by an error after some of its batches were committed."""


def heartbeat(job_id: Any) -> None:
    Job.objects.filter(pk=job_id, status=RUNNING).update(heartbeat_at=timezone.now())


def _end(job: Job, status: str, *, drop: tuple[str, ...] = (), keep_input: bool = False, **fields: Any) -> None:
    params = {k: v for k, v in job.params.items() if k not in PRIVATE_PARAMS and k not in drop}
    now = timezone.now()
    with transaction.atomic():
        Job.objects.filter(pk=job.pk).update(status=status, finished_at=now, heartbeat_at=now, params=params, **fields)
        if not keep_input:
            JobInput.objects.filter(job_id=job.pk).delete()
    job.refresh_from_db()


def finish(job: Job, report: dict[str, Any]) -> None:
    _end(job, SUCCEEDED, drop=(CHECKPOINT,), report=report, error="")


def fail(job: Job, error: str | Said, report: dict[str, Any] | None = None) -> None:
    """The job failed; a partial import (batches committed) keeps its file for `resume_job`. The
    error is English in `job.error`; a `Said` error is also kept in the report (`error_in_language`)."""
    partial = bool((job.params.get(CHECKPOINT) or {}).get("episodes_written"))
    if isinstance(error, Said):
        report = {**(report or {}), ERROR_SAID: error.stored()}
    _end(job, FAILED, keep_input=partial, error=str(error)[:4000], report=report)


def error_in_language(job: Job) -> str:
    """Why the job failed, in the active language where the error kept its words (`wording`)."""
    return in_language((job.report or {}).get(ERROR_SAID), job.error)


def stale_after() -> timedelta:
    return timedelta(seconds=settings.MEMCONSOLE_JOBS_STALE_SECONDS)


def running() -> list[Job]:
    return list(Job.objects.filter(status=RUNNING))


def is_stale(job: Job, factor: float = 1.0) -> bool:
    """Whether the running job's worker has not reported for `factor` × MEMCONSOLE_JOBS_STALE_SECONDS."""
    return job.heartbeat_at is None or timezone.now() - job.heartbeat_at > stale_after() * factor


def requeue(job: Job, *, worker_dead: bool = False) -> bool:
    """Put a running job whose worker stopped back in the queue (True), or mark it interrupted
    after MAX_ATTEMPTS (False). Without `worker_dead` (its worker is known to be gone) only a job
    that is still stale is touched: one that reported meanwhile is left alone; with it, only the
    attempt of that same worker."""
    still = Job.objects.filter(pk=job.pk, status=RUNNING, worker=job.worker)
    if not worker_dead:
        still = still.filter(heartbeat_at__lt=timezone.now() - stale_after())
    if job.attempts >= MAX_ATTEMPTS:
        note = f"its worker stopped {job.attempts} times; finish it with `{job.resume_command}`"
        if still.update(status=INTERRUPTED, finished_at=timezone.now(), note=note):
            job.refresh_from_db()
        return False
    note = f"resumed after its worker stopped (attempt {job.attempts + 1} of {MAX_ATTEMPTS})"
    moved = still.update(status=QUEUED, note=note, worker="")
    job.refresh_from_db()
    return bool(moved)


def mark_interrupted(job: Job, note: str) -> None:
    Job.objects.filter(pk=job.pk, status__in=ACTIVE).update(status=INTERRUPTED, finished_at=timezone.now(), note=note)
    job.refresh_from_db()


def reopen(job: Job) -> Job:
    """An interrupted or failed job queued again (`manage.py resume_job`); `JobBusy` when another
    job of its kind is active for its scope."""
    try:
        with transaction.atomic():
            Job.objects.filter(pk=job.pk).update(status=QUEUED, attempts=0, finished_at=None, error="", worker="")
    except IntegrityError:
        raise JobBusy(active(job.kind, job.scope) or job) from None
    job.refresh_from_db()
    return job


@dataclass(frozen=True)
class KindStats:
    kind: str
    queued: int
    running: int
    finished: dict[str, int]  # by final status
    seconds_sum: float
    seconds: list[float]  # durations of finished jobs, for the histogram's buckets


def queue_stats(duration_sample: int = 10_000) -> list[KindStats]:
    """Per kind: jobs queued and running now, finished jobs by status and their durations."""
    by_kind: dict[str, dict[str, int]] = {kind: {} for kind in KIND_LABELS}
    for row in Job.objects.values("kind", "status").annotate(n=Count("pk")):
        by_kind.setdefault(row["kind"], {})[row["status"]] = row["n"]
    stats = []
    for kind, counts in by_kind.items():
        finished = Job.objects.filter(kind=kind, started_at__isnull=False, finished_at__isnull=False)
        rows = finished.order_by("-finished_at").values_list("started_at", "finished_at")[:duration_sample]
        seconds = [(end - start).total_seconds() for start, end in rows if start is not None and end is not None]
        stats.append(
            KindStats(
                kind=kind,
                queued=counts.get(QUEUED, 0),
                running=counts.get(RUNNING, 0),
                finished={status: counts.get(status, 0) for status in (SUCCEEDED, FAILED, INTERRUPTED)},
                seconds_sum=sum(seconds),
                seconds=seconds,
            )
        )
    return stats
