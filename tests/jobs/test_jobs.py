"""Background jobs (issue 21) with django-tasks' real database worker (its `db_worker` loop, run
here in-process until the queue is empty): the request answers at once with the job page, the
worker does the work, the page shows progress, counts, ETA, the report or the error; one job of
a kind per scope; jobs of a stopped worker are resumed, then reported as interrupted."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone
from django_tasks.base import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from memconsole.jobs import queue
from memconsole.jobs.management.commands.jobs_worker import interval_seconds
from memconsole.memory import jobs
from memconsole.memory.audit import Actor
from memconsole.memory.episodes import remember
from memconsole.memory.models import AuditEntry, BotGrant, Episode, HealthRun
from tests.console.conftest import htmx

from .work import job_location, real_worker

pytestmark = pytest.mark.django_db(transaction=True)


def langbot_file(n: int, name: str = "memory.json") -> SimpleUploadedFile:
    document = {
        "version": 1,
        "scope_key": "old-bot:group_1",
        "episodes": [{"id": f"e{i}", "content": f"episode number {i} about tea", "status": "active"} for i in range(n)],
    }
    return SimpleUploadedFile(name, json.dumps(document).encode(), content_type="application/json")


def import_form(upload, **overrides):
    data = {"file": upload, "format": "langbot", "bot_uuid": "bot-c", "session_name": "group_9", "isolation": "session"}
    data.update(overrides)
    return data


def started_job(response) -> jobs.Job:
    return jobs.Job.objects.get(pk=job_location(response).rstrip("/").rsplit("/", 1)[-1])


def test_it_answers_an_import_at_once_and_the_real_worker_runs_it(admin_client_):
    response = admin_client_.post(reverse("console:import"), import_form(langbot_file(30)))
    assert response.status_code == 302
    job = started_job(response)
    assert job.status == jobs.QUEUED and not Episode.objects.exists()
    task = DBTaskResult.objects.get(id=job.task_id)
    assert task.status == TaskResultStatus.READY and task.args_kwargs == {"args": [str(job.pk)], "kwargs": {}}

    page = admin_client_.get(response["Location"]).content.decode()
    assert "Waiting for a worker" in page and 'hx-trigger="every 1s"' in page

    real_worker()

    job.refresh_from_db()
    assert job.status == jobs.SUCCEEDED and job.report["episodes"] == 30 and job.attempts == 1
    assert Episode.objects.filter(user_key="bot-c:group_9").count() == 30
    assert DBTaskResult.objects.get(id=job.task_id).status == TaskResultStatus.SUCCESSFUL
    assert not jobs.JobInput.objects.exists()  # the uploaded file is not kept after the job
    page = admin_client_.get(response["Location"]).content.decode()
    assert "The file was imported." in page and "<dt>Episodes</dt><dd>30</dd>" in page
    assert 'value="100"' in page and "every 1s" not in page  # the bar is full and the polling stopped
    assert AuditEntry.objects.filter(operation="import", actor="user:admin").exists()


def test_it_shows_progress_counts_and_eta_of_a_running_job(admin_client_):
    job = jobs.create(jobs.REINDEX, scope="", bot_uuid="", actor=Actor.system("t"), params={})
    jobs.claim(job.pk, "w1")
    jobs.Job.objects.filter(pk=job.pk).update(
        stage="indexing", done=250, total=1000, stage_started_at=timezone.now() - timedelta(seconds=10)
    )
    response = admin_client_.get(reverse("console:job", args=[job.pk]), **htmx("job"))
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="job"') and "<html" not in html
    assert '<progress id="job-progress" max="100" value="25"' in html and "250 of 1000 (25%)" in html
    assert "Indexing for search" in html and "about 30 seconds" in html  # 750 left at 25 per second
    assert 'hx-get="/jobs/' in html and 'hx-trigger="every 1s"' in html


def test_it_refuses_a_second_job_of_a_kind_for_the_same_scope(admin_client_):
    first = admin_client_.post(reverse("console:import"), import_form(langbot_file(3)))
    assert first.status_code == 302
    second = admin_client_.post(reverse("console:import"), import_form(langbot_file(3)))
    assert second.status_code == 409
    page = second.content.decode()
    assert "is already active for the same memory space" in page and job_location(first) in page
    other = admin_client_.post(reverse("console:import"), import_form(langbot_file(3), session_name="group_8"))
    assert other.status_code == 302  # another scope: allowed
    real_worker()
    assert admin_client_.post(reverse("console:import"), import_form(langbot_file(3))).status_code == 302


def test_it_reports_an_error_in_plain_words(admin_client_):
    bad = SimpleUploadedFile("bad.json", b'{"episodes": [{"content": 5}]}', content_type="application/json")
    response = admin_client_.post(reverse("console:import"), import_form(bad, format="memconsole"))
    real_worker()
    job = started_job(response)
    assert job.status == jobs.FAILED and job.error and "Traceback" not in job.error
    page = admin_client_.get(response["Location"]).content.decode()
    assert "The job failed" in page and job.error.replace("'", "&#x27;") in page
    assert not Episode.objects.exists()


def test_it_runs_health_and_reindex_jobs(operator_client, admin_client_):
    health = started_job(operator_client.post(reverse("console:diagnostics_run")))
    reindex = started_job(operator_client.post(reverse("console:diagnostics_reindex")))
    real_worker()
    health.refresh_from_db()
    reindex.refresh_from_db()
    assert health.status == reindex.status == jobs.SUCCEEDED
    assert HealthRun.objects.count() == 1 and health.report["status"] in {"OK", "WARN", "ERROR"}
    assert "summary" in reindex.report and reindex.report["drift"] == 0
    page = operator_client.get(reverse("console:job", args=[reindex.pk])).content.decode()
    assert "vectors checked: the index matches the database." in page  # said in the reader's language
    chinese = operator_client.get(reverse("console:job", args=[reindex.pk]), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "索引与数据库一致" in chinese.content.decode()
    # an operator's index repair is audited (found by a console user: only the job row said it ran)
    entry = AuditEntry.objects.get(operation="index_repair")
    assert entry.actor == "user:operator" and entry.target_type == "index"


def test_it_erases_as_a_job_and_forgets_the_speaker_id(admin_client_, keys, system):
    remember(keys, system, "Alice likes green tea", sender_id="u-erase", sender_name="Alice")
    response = admin_client_.post(
        reverse("console:erasure_run"), {"sender_id": "u-erase", "bot_uuid": "bot-a", "confirmation": "u-erase"}
    )
    job = started_job(response)
    assert job.params["sender_id"] == "u-erase" and "u-erase" not in json.dumps(
        DBTaskResult.objects.get(id=job.task_id).args_kwargs
    )
    real_worker()
    job.refresh_from_db()
    assert job.status == jobs.SUCCEEDED and job.report["episodes"] == 1
    assert "sender_id" not in job.params and not Episode.objects.filter(sender_id="u-erase").exists()
    page = admin_client_.get(response["Location"]).content.decode()
    assert "The speaker was erased." in page and "u-erase" not in page


def test_it_keeps_jobs_to_those_who_may_see_them(admin_client_, admin_user, viewer_client, client):
    response = admin_client_.post(reverse("console:import"), import_form(langbot_file(2)))
    location = job_location(response)
    assert viewer_client.get(location).status_code == 403  # a viewer may not import
    assert client.get(location).status_code == 302  # anonymous: to the login page
    assert admin_client_.post(location).status_code == 405
    BotGrant.objects.create(user=admin_user, bot_uuid="bot-z")  # now limited to another bot
    assert admin_client_.get(location).status_code == 200  # their own job still
    other = jobs.create(jobs.IMPORT, scope="x", bot_uuid="bot-c", actor=Actor.system("someone"), params={})
    assert admin_client_.get(reverse("console:job", args=[other.pk])).status_code == 404
    assert admin_client_.get("/jobs/00000000-0000-0000-0000-000000000000/").status_code == 404


def make_stale(job: jobs.Job) -> None:
    jobs.Job.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))


def test_it_resumes_the_job_of_a_worker_that_stopped(admin_client_):
    response = admin_client_.post(reverse("console:import"), import_form(langbot_file(12)))
    job = started_job(response)
    DBTaskResult.objects.filter(id=job.task_id).update(status=TaskResultStatus.RUNNING)  # a worker took it...
    jobs.claim(job.pk, "worker-that-died")
    old_task = job.task_id
    make_stale(job)  # ... and stopped reporting

    assert queue.recover() == [f"{job.pk}: resumed"]
    job.refresh_from_db()
    assert job.status == jobs.QUEUED and "resumed after its worker stopped" in job.note and job.task_id != old_task
    assert DBTaskResult.objects.get(id=old_task).status == TaskResultStatus.FAILED
    real_worker()
    job.refresh_from_db()
    assert job.status == jobs.SUCCEEDED and job.attempts == 2
    assert Episode.objects.filter(user_key="bot-c:group_9").count() == 12


def test_it_leaves_a_job_alone_while_its_worker_reports():
    job = jobs.create(jobs.REINDEX, scope="", bot_uuid="", actor=Actor.system("t"), params={})
    jobs.claim(job.pk, "alive")
    assert queue.recover() == []
    assert jobs.Job.objects.get(pk=job.pk).status == jobs.RUNNING


def test_it_reports_a_job_interrupted_too_often_with_the_command_that_finishes_it(admin_client_):
    job = jobs.create(jobs.REINDEX, scope="", bot_uuid="", actor=Actor.system("t"), params={})
    for _attempt in range(jobs.MAX_ATTEMPTS):
        jobs.Job.objects.filter(pk=job.pk).update(status=jobs.QUEUED)
        jobs.claim(job.pk, "dies")
        make_stale(job)
    assert queue.recover() == [f"{job.pk}: interrupted"]
    job.refresh_from_db()
    assert job.status == jobs.INTERRUPTED and f"manage.py resume_job {job.pk}" in job.note
    page = admin_client_.get(reverse("console:job", args=[job.pk])).content.decode()
    assert "The job was interrupted" in page and f"python manage.py resume_job {job.pk}" in page

    out, err = StringIO(), StringIO()
    call_command("resume_job", str(job.pk), stdout=out, stderr=err)
    job.refresh_from_db()
    assert job.status == jobs.SUCCEEDED and f"job {job.pk} (reindex): succeeded" in out.getvalue()
    with pytest.raises(CommandError, match="no job"):
        call_command("resume_job", "00000000-0000-0000-0000-000000000000")


def test_it_counts_queued_running_and_finished_jobs():
    system = Actor.system("t")
    done = jobs.create(jobs.HEALTH, scope="", bot_uuid="", actor=system, params={})
    jobs.claim(done.pk, "w")
    jobs.finish(done, {"summary": "ok"})
    jobs.create(jobs.IMPORT, scope="a", bot_uuid="b", actor=system, params={})
    stats = {s.kind: s for s in jobs.queue_stats()}
    assert stats["import"].queued == 1 and stats["health"].finished["succeeded"] == 1
    assert len(stats["health"].seconds) == 1


def test_it_exposes_queue_depth_and_durations_in_metrics(client, settings):
    settings.MEMCONSOLE_METRICS_TOKEN, settings.MEMCONSOLE_METRICS_ALLOW = "metrics-token-0123456789abcdef", []
    system = Actor.system("t")
    done = jobs.create(jobs.HEALTH, scope="", bot_uuid="", actor=system, params={})
    jobs.claim(done.pk, "w")
    jobs.Job.objects.filter(pk=done.pk).update(started_at=timezone.now() - timedelta(seconds=42))
    done.refresh_from_db()
    jobs.finish(done, {"summary": "ok"})
    jobs.create(jobs.IMPORT, scope="a", bot_uuid="b", actor=system, params={})
    response = client.get("/metrics", headers={"Authorization": "Bearer metrics-token-0123456789abcdef"})
    text = response.content.decode()
    assert 'memconsole_jobs_queued{kind="import"} 1.0' in text
    assert 'memconsole_jobs_running{kind="import"} 0.0' in text
    assert 'memconsole_jobs_finished_total{kind="health",status="succeeded"} 1.0' in text
    assert 'memconsole_job_duration_seconds_bucket{kind="health",le="30.0"} 0.0' in text
    assert 'memconsole_job_duration_seconds_bucket{kind="health",le="60.0"} 1.0' in text
    assert 'memconsole_job_duration_seconds_count{kind="health"} 1.0' in text


def test_it_runs_the_model_reembedding_as_a_job(operator_client):
    response = operator_client.post(reverse("console:diagnostics_reembed"))
    job = started_job(response)
    real_worker()
    job.refresh_from_db()
    assert job.status == jobs.SUCCEEDED and job.report["status"] == "current"  # no switch under way
    assert "re-embedding current" in operator_client.get(response["Location"]).content.decode()


@pytest.mark.parametrize("interval", ["-1", "nan", "inf", "0", "abc", "3601"])
def test_the_worker_refuses_an_interval_that_is_not_a_sane_number_of_seconds(interval):
    """Found by trying the command: -1 and nan ended in a traceback, 0 busy-looped at a full core."""
    with pytest.raises(CommandError, match=r"is not a number of seconds from 0\.1 to 3600"):
        call_command("jobs_worker", "--batch", "--interval", interval)


def test_the_worker_takes_a_fractional_interval():
    assert interval_seconds("0.5") == 0.5 and interval_seconds("2") == 2.0
