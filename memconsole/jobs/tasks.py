"""The one django-tasks task: run a stored job by its id (its inputs are on the row, never in the
task's arguments, so nothing that names a person sits in the task table)."""

from __future__ import annotations

from django_tasks import TaskContext, task

from . import runner


@task(takes_context=True)
def run_job(context: TaskContext, job_id: str) -> str:
    """Run the job; returns its final status (the job's own row holds the report or the error)."""
    workers = context.task_result.worker_ids
    return runner.execute(job_id, worker=workers[-1] if workers else "worker")
