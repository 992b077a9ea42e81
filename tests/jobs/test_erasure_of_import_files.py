"""An erasure leaves no import file behind that would write the person back (erasure_imports.py):
a failed import that committed part of its file keeps it for `resume_job`, and a queued import holds
its file until it runs. Their files are in clear in the database."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from memconsole.memory import erasure, jobs
from memconsole.memory.episodes import remember
from memconsole.memory.errors import ValidationError
from memconsole.memory.models import AuditEntry, Episode

from .test_import_batches import poison, small_batches  # noqa: F401  (fixtures: e75 refused, batches of 50)
from .work import job_location, run_queued_jobs

pytestmark = pytest.mark.django_db(transaction=True)


def start_import(client, sender_of) -> jobs.Job:
    document = {
        "version": 1,
        "scope_key": "old-bot:group_1",
        "episodes": [
            {"id": f"e{i}", "content": f"episode {i} about tea", "status": "active", "sender_id": sender_of(i)}
            for i in range(120)
        ],
    }
    upload = SimpleUploadedFile("tea.json", json.dumps(document).encode(), content_type="application/json")
    data = {"file": upload, "format": "langbot", "bot_uuid": "bot-b", "session_name": "group_9", "isolation": "session"}
    response = client.post(reverse("console:import"), data)
    return jobs.Job.objects.get(pk=job_location(response).rstrip("/").rsplit("/", 1)[-1])


def failed_partial_import(client, sender_of) -> jobs.Job:
    job = start_import(client, sender_of)
    (failed,) = run_queued_jobs()
    assert failed.status == jobs.FAILED and "stopped after writing 50 episodes" in failed.error
    assert jobs.JobInput.objects.filter(job=job).exists()  # kept for resume_job
    return job


def test_erasing_a_person_deletes_a_kept_import_file_that_holds_them(admin_client_, poison, system):  # noqa: F811
    job = failed_partial_import(admin_client_, lambda i: "u-ann" if i >= 100 else "u-bob")  # Ann: not yet written

    preview = erasure.erase_subject("u-ann", bot_uuid="bot-b", actor=system, dry_run=True)
    assert preview.import_files == 1 and preview.total == 1 and "1 kept import files" in preview.summary()
    assert jobs.JobInput.objects.filter(job=job).exists()  # a dry run deletes nothing

    report = erasure.erase_subject("u-ann", bot_uuid="bot-b", actor=system)

    assert report.import_files == 1 and report.receipt_audit_id
    assert not jobs.JobInput.objects.filter(job=job).exists()
    job.refresh_from_db()
    assert "deleted by an erasure" in job.note
    receipt = AuditEntry.objects.get(audit_id=report.receipt_audit_id)
    assert receipt.payload["metadata"]["import_files"] == 1
    poison()  # the import's own cause is gone; resuming must still not write Ann back
    with pytest.raises(CommandError, match="no longer kept: its file was deleted by an erasure"):
        call_command("resume_job", str(job.pk), stdout=StringIO(), stderr=StringIO())
    assert not Episode.objects.filter(sender_id="u-ann").exists()
    assert Episode.objects.filter(sender_id="u-bob", bot_uuid="bot-b").count() == 50  # the committed batch stays


def test_a_kept_import_file_without_the_person_stays_resumable(admin_client_, poison, system):  # noqa: F811
    job = failed_partial_import(admin_client_, lambda i: "u-bob")

    report = erasure.erase_subject("u-ann", bot_uuid="bot-b", actor=system)

    assert report.import_files == 0
    poison()
    call_command("resume_job", str(job.pk), stdout=StringIO(), stderr=StringIO())
    job.refresh_from_db()
    assert job.status == jobs.SUCCEEDED and Episode.objects.filter(bot_uuid="bot-b").count() == 120


def test_an_erasure_waits_for_a_queued_import_that_holds_the_person(admin_client_, system, keys):
    remember(keys, system, "Ann likes green tea", sender_id="u-ann")
    job = start_import(admin_client_, lambda i: "u-ann")  # queued, not run yet

    with pytest.raises(ValidationError, match=f"queued or running \\(job {job.pk}\\)"):
        erasure.erase_subject("u-ann", actor=system)

    assert Episode.objects.filter(sender_id="u-ann").count() == 1  # nothing was erased
    page = admin_client_.post(reverse("console:erasure"), {"sender_id": "u-ann", "bot_uuid": ""})
    assert page.status_code == 400 and "queued or running" in page.content.decode()


def test_an_erasure_removes_the_person_from_import_reports(admin_client_, system):
    """Found by probing: an import job's report kept "speaker:<id>" and the traits it left out of
    their profile after the person was erased. Another person's items stay."""
    traits = [f"trait {n} of victim" for n in range(40)]
    document = {
        "version": 1,
        "scope_key": "old-bot:group_1",
        "episodes": [{"id": "e1", "content": "hello", "importance": 9, "sender_id": "victim-77"}],
        "profiles": [
            {"type": "speaker", "sender_id": "victim-77", "profile": {"name": "Vic", "traits": traits}},
            {"type": "speaker", "sender_id": "other-1", "profile": {"name": "Otto", "traits": traits}},
        ],
    }
    upload = SimpleUploadedFile("people.json", json.dumps(document).encode(), content_type="application/json")
    data = {"file": upload, "format": "langbot", "bot_uuid": "bot-b", "session_name": "group_9"}
    response = admin_client_.post(reverse("console:import"), {**data, "isolation": "session"})
    (done,) = run_queued_jobs()
    assert done.status == jobs.SUCCEEDED, done.error
    assert "speaker:victim-77" in json.dumps(done.report) and "trait 1 of victim" in json.dumps(done.report)
    assert job_location(response)

    preview = erasure.erase_subject("victim-77", bot_uuid="bot-b", actor=system, dry_run=True)
    report = erasure.erase_subject("victim-77", bot_uuid="bot-b", actor=system)

    assert preview.import_report_items == report.import_report_items >= 2  # the profile's warning, the episode's
    done.refresh_from_db()
    kept = json.dumps(done.report)
    assert "victim-77" not in kept and "e1" not in {item["id"] for item in done.report["warnings"]}
    assert "speaker:other-1" in kept  # the other person's warning stays
