"""Running background jobs from tests: `run_queued_jobs` runs what is queued with the worker's own
runner (`memconsole.jobs.runner.execute`) in the test's process and transaction, for the console
tests that check what a job did; `real_worker` runs django-tasks' database worker loop itself
(`jobs_worker --batch`'s loop), which needs a test with `transactional_db`."""

from __future__ import annotations

from typing import Any

from django.test import Client

from memconsole.jobs import runner
from memconsole.jobs.worker import make_worker
from memconsole.memory import jobs


def run_queued_jobs() -> list[jobs.Job]:
    done = []
    for job in jobs.Job.objects.filter(status=jobs.QUEUED).order_by("created_at"):
        runner.execute(job.pk, worker="tests")
        job.refresh_from_db()
        done.append(job)
    return done


def job_location(response: Any) -> str:
    """Where a response that started a job sends the browser (a redirect, or htmx's HX-Redirect)."""
    location = response.get("HX-Redirect") or response.get("Location")
    assert location and "/jobs/" in location, (response.status_code, response.content[:500])
    return str(location)


def follow_job(client: Client, response: Any, **headers: Any) -> Any:
    """Run the queued jobs, then open the page of the job that `response` started."""
    location = job_location(response)
    run_queued_jobs()
    return client.get(location, **headers)


def real_worker() -> None:
    """django-tasks-db's worker loop over the queue until it is empty (needs transactional_db)."""
    make_worker(batch=True, interval=0).run()
