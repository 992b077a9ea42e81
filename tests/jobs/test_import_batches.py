"""A console import job writes in batches (issue 21), each committed with its audit entry and the
job's checkpoint: a job stopped by an error after some batches says it is partial and how to
finish it, and finishing it writes the rest, no episode twice. The batch size is made small here
(`writer.JOB_BATCH`) so that a file of a hundred episodes has several; the worker-process
tests (test_worker_crash.py, test_import_concurrency.py) use the real one."""

from __future__ import annotations

import json
import subprocess
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import Count
from django.urls import reverse

from memconsole.jobs import queue
from memconsole.memory import jobs, tamper
from memconsole.memory.imports import writer
from memconsole.memory.models import AuditEntry, Episode

from .work import job_location, run_queued_jobs

pytestmark = pytest.mark.django_db(transaction=True)

EPISODES = 120
BATCH = 50


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    monkeypatch.setattr(writer, "JOB_BATCH", BATCH)
    monkeypatch.setattr(writer, "SQLITE_PAUSE", 0)


def upload() -> SimpleUploadedFile:
    document = {
        "version": 1,
        "scope_key": "old-bot:group_1",
        "episodes": [{"id": f"e{i}", "content": f"episode {i} about tea", "status": "active"} for i in range(EPISODES)],
    }
    return SimpleUploadedFile("tea.json", json.dumps(document).encode(), content_type="application/json")


def start_import(client, **overrides) -> jobs.Job:
    data = {"file": upload(), "format": "langbot", "bot_uuid": "bot-b", "session_name": "group_9"}
    data.update({"isolation": "session", **overrides})
    response = client.post(reverse("console:import"), data)
    return jobs.Job.objects.get(pk=job_location(response).rstrip("/").rsplit("/", 1)[-1])


def imported() -> tuple[int, int]:
    counts = Episode.objects.filter(bot_uuid="bot-b").aggregate(
        rows=Count("pk"), ids=Count("imported_episode_id", distinct=True)
    )
    return counts["rows"], counts["ids"]


@pytest.fixture
def poison():
    """A database trigger that refuses to store the episode imported from id e75 (in the second batch)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "CREATE TRIGGER h3_poison BEFORE INSERT ON memory_episode WHEN NEW.imported_episode_id = 'e75'"
                " BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END"
            )
        else:
            cursor.execute(
                "CREATE FUNCTION h3_poison() RETURNS trigger AS $$ BEGIN IF NEW.imported_episode_id = 'e75' THEN"
                " RAISE EXCEPTION 'refused by the test trigger'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                "CREATE TRIGGER h3_poison BEFORE INSERT ON memory_episode FOR EACH ROW EXECUTE FUNCTION h3_poison()"
            )

    def lift() -> None:
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                cursor.execute("DROP TRIGGER IF EXISTS h3_poison")
            else:
                cursor.execute("DROP TRIGGER IF EXISTS h3_poison ON memory_episode")
                cursor.execute("DROP FUNCTION IF EXISTS h3_poison()")

    yield lift
    lift()


def test_it_writes_an_import_job_in_audited_batches(admin_client_):
    job = start_import(admin_client_, dry_run="")
    (done,) = run_queued_jobs()
    assert done.status == jobs.SUCCEEDED, done.error
    assert imported() == (EPISODES, EPISODES)
    entries = AuditEntry.objects.filter(operation="import", scope_key__startswith="bot-b:").order_by("id")
    summaries = [entry.summary for entry in entries]
    assert summaries[:3] == [f"imported a batch of {n} episodes (langbot); the import goes on" for n in (50, 50, 20)]
    assert summaries[3:] == [f"imported {EPISODES} episodes and 0 profiles (langbot)"]
    assert done.report["episodes"] == done.report["indexed"] == EPISODES
    assert jobs.CHECKPOINT not in done.params and done.pk == job.pk  # nothing left to resume from
    rows = tamper.check_rows()  # every imported episode's state is in the chain (tamper evidence)
    assert rows.ok and rows.episodes == EPISODES and rows.unrecorded == 0, rows.summary()


def test_it_reports_a_partial_import_and_resuming_writes_the_rest_once(admin_client_, poison):
    job = start_import(admin_client_, dry_run="")
    (failed,) = run_queued_jobs()
    assert failed.status == jobs.FAILED
    assert "stopped after writing 50 episodes" in failed.error and failed.resume_command in failed.error
    assert imported() == (BATCH, BATCH)  # the first batch stays; the refused one rolled back whole
    page = admin_client_.get(reverse("console:job", args=[job.pk])).content.decode()
    assert "stopped after writing 50 episodes" in page

    poison()  # the cause is fixed; the operator runs the command the page shows
    out = StringIO()
    call_command("resume_job", str(job.pk), stdout=out, stderr=StringIO())
    job.refresh_from_db()
    assert job.status == jobs.SUCCEEDED, job.error
    assert imported() == (EPISODES, EPISODES)
    assert (job.report["episodes"], job.report["conflict_count"], job.report["indexed"]) == (EPISODES, 0, EPISODES)
    batches = AuditEntry.objects.filter(operation="import", scope_key__startswith="bot-b:").count()
    assert batches == 3 + 1  # each batch audited once (the refused one not at all), and the summary
    rows = tamper.check_rows()
    assert rows.ok and rows.unrecorded == 0, rows.summary()


def test_it_writes_nothing_in_a_dry_run_job(admin_client_):
    start_import(admin_client_, dry_run="on")
    (done,) = run_queued_jobs()
    assert done.status == jobs.SUCCEEDED and done.report["episodes"] == EPISODES and done.report["dry_run"]
    assert imported() == (0, 0) and not AuditEntry.objects.filter(operation="import").exists()
    assert jobs.CHECKPOINT not in done.params


def test_resume_job_finishes_a_job_whose_worker_on_this_machine_is_gone(admin_client_):
    """A job left "running" by a worker killed with -9: resume_job runs it, where it said "wait"."""
    job = start_import(admin_client_, dry_run="")
    gone = _dead_pid()
    jobs.Job.objects.filter(pk=job.pk).update(status=jobs.RUNNING, worker=f"worker:{queue.this_host()}:{gone}:x1")

    call_command("resume_job", str(job.pk), stdout=StringIO(), stderr=StringIO())

    job.refresh_from_db()
    assert job.status == jobs.SUCCEEDED, job.error
    assert imported() == (EPISODES, EPISODES)


def test_resume_job_says_plainly_that_a_text_is_no_job(db):
    with pytest.raises(CommandError, match="no job not-a-uuid"):
        call_command("resume_job", "not-a-uuid", stdout=StringIO(), stderr=StringIO())


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid
