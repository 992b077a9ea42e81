"""What each kind of background job does: the domain operation it calls, with the job's stored
inputs and a `jobs.Progress` callback. One function per kind, chosen by `run(job, progress)`,
which returns the report as JSON data (`Report.as_dict()`) with a one-line `summary`.

Each one may be run again after its worker stopped mid-way (docs/operations.md, "Jobs"): an import
writes in batches and records each committed one in the job's checkpoint (`jobs.Checkpoint`), so a
resumed import writes only the batches not yet committed (none twice), and one resumed after its
last transaction only indexes what it wrote; erasure (from its journal), the health check, reindex,
key rotation, re-embedding and bulk actions are safe to repeat (each finds what is left to do).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import bulk, erasure, health, imports, jobs, reembed
from .reindex import reindex
from .rotation import rotate_keys
from .scopes import derive_scope

log = logging.getLogger("memconsole.memory")

Runner = Callable[[jobs.Job, jobs.Progress], dict[str, Any]]


def _summarised(report: Any) -> dict[str, Any]:
    data: dict[str, Any] = report.as_dict()
    data.setdefault("summary", report.summary())
    return data


def run_import(job: jobs.Job, progress: jobs.Progress) -> dict[str, Any]:
    params = job.params
    if params.get("written"):  # a job of the one-transaction import, interrupted after its commit
        report = _summarised(reindex(check_only=False, progress=progress, actor=jobs.actor_of(job)))
        note = "the import's rows were written before its worker stopped; indexing them was finished by reindex"
        return {"resumed_after_write": True, "reindex": report, "summary": f"{note}: {report['summary']}"}
    name, data = jobs.input_of(job)
    folder = tempfile.mkdtemp(prefix="memconsole-job-")
    path = Path(folder) / "upload"
    checkpoint = jobs.Checkpoint(job)
    try:
        path.write_bytes(data)
        del data
        result = imports.import_file(
            path,
            params["format"],
            bot_uuid=params["bot_uuid"],
            session_name=params.get("session_name") or None,
            isolation=params["isolation"],
            actor=jobs.actor_of(job),
            dry_run=bool(params.get("dry_run")),
            progress=progress,
            file_name=name,
            checkpoint=checkpoint,
        )
    except Exception as exc:
        written = checkpoint.state.get("episodes_written", 0)
        if not written or checkpoint.state.get("written"):
            raise
        log.exception("import job %s stopped after %s episodes", job.pk, written)
        raise jobs.PartialImport(
            f"the import stopped after writing {written} episodes ({type(exc).__name__}: {exc}); they stay in the"
            f" memory space, and `{job.resume_command}` writes the rest (none twice)"
        ) from exc
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return _summarised(result)


def run_erasure(job: jobs.Job, progress: jobs.Progress) -> dict[str, Any]:
    """Run again after a kill, `erase_subject` finishes the first run from its journal."""
    params = job.params
    steps = [0]

    def step(_line: str) -> None:  # one line per step of the vector part: counted, never stored
        steps[0] += 1
        progress("erasing", steps[0], None)

    progress("erasing", 0, None)
    report = erasure.erase_subject(
        params["sender_id"],
        bot_uuid=params.get("bot_uuid") or None,
        actor=jobs.actor_of(job),
        dry_run=False,
        progress=step,
    )
    return _summarised(report)


def run_health(job: jobs.Job, progress: jobs.Progress) -> dict[str, Any]:
    progress("checking", 0, 1)
    result = health.run_health_check(jobs.actor_of(job))
    progress("checking", 1, 1)
    return {**result, "summary": f"health {result['status']} ({len(result['checks'])} checks)"}


def run_reindex(job: jobs.Job, progress: jobs.Progress) -> dict[str, Any]:
    check_only = bool(job.params.get("check_only"))
    return _summarised(reindex(check_only=check_only, progress=progress, actor=jobs.actor_of(job)))


def run_rotation(job: jobs.Job, progress: jobs.Progress) -> dict[str, Any]:
    return _summarised(rotate_keys(progress=progress, actor=jobs.actor_of(job)))


def run_reembed(job: jobs.Job, progress: jobs.Progress) -> dict[str, Any]:
    """Finish a model switch now (waiting for the lease if the serving process's thread holds it)."""
    report = reembed.run(progress=progress, wait=True)
    summary = (
        f"re-embedding {report.status}: {report.reembedded} episodes re-embedded, "
        f"{report.scopes_promoted} scopes switched to {report.model_id}"
    )
    return {**report.as_dict(), "summary": summary}


def run_bulk(job: jobs.Job, progress: jobs.Progress) -> dict[str, Any]:
    """A bulk action of more than one chunk, started from the Episodes tab. Its audit entries share
    the job's id as their batch id, so a run repeated after its worker stopped stays one batch."""
    params = job.params
    keys = derive_scope(params["bot_uuid"], params["session_name"], params["isolation"])
    action = params["action"]
    outcome = bulk.run(keys, jobs.actor_of(job), action, params["episode_ids"], batch_id=job.pk.hex, progress=progress)
    changed = bulk.changed_in(outcome.batch_id, action)
    return {"action": action, "changed": changed, "batch_id": outcome.batch_id, "summary": f"{action}: {changed}"}


RUNNERS: dict[str, Runner] = {
    jobs.IMPORT: run_import,
    jobs.ERASURE: run_erasure,
    jobs.HEALTH: run_health,
    jobs.REINDEX: run_reindex,
    jobs.ROTATION: run_rotation,
    jobs.REEMBED: run_reembed,
    jobs.BULK: run_bulk,
}


def run(job: jobs.Job, progress: jobs.Progress) -> dict[str, Any]:
    """Do the job's work; raises what the domain operation raises."""
    try:
        runner = RUNNERS[job.kind]
    except KeyError:
        raise ValueError(f"no runner for jobs of kind {job.kind!r}") from None
    return runner(job, progress)
