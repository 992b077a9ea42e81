"""The Export tab (streamed JSON download), the Import upload and the Diagnostics page."""

from __future__ import annotations

import json

import pytest
from cryptography.fernet import Fernet
from django.core.files.uploadedfile import SimpleUploadedFile
from pytest_django.asserts import assertContains, assertNotContains

from memconsole.memory import jobs
from memconsole.memory.audit import Actor
from memconsole.memory.models import AuditEntry, BotGrant, Episode, HealthRun, Scope
from tests.jobs.work import follow_job, job_location, run_queued_jobs

from .conftest import htmx

pytestmark = pytest.mark.django_db


def download(client, address, data) -> dict:
    response = client.post(address, data)
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    assert response["Content-Disposition"].startswith('attachment; filename="memconsole-bot-a_group_100-session-')
    return json.loads(b"".join(response.streaming_content))


def test_it_shows_the_export_form_to_admins_and_explains_it_to_viewers(admin_client_, viewer_client, url, light_scope):
    response = admin_client_.get(url("export", light_scope.pk))
    page = response.content.decode()
    assert '<button type="submit">Download JSON</button>' in page and 'name="include_audit"' in page
    assertContains(response, "Import a file into this space")
    response = viewer_client.get(url("export", light_scope.pk))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Download JSON" not in page and "Your role cannot export memory." in page


def test_it_downloads_the_scope_as_json_with_the_chosen_statuses(admin_client_, url, scope):
    document = download(admin_client_, url("export_download", scope.pk), {"statuses": ["active"]})
    assert document["episodes"]["statuses"] == ["active"] and document["episodes"]["count"] == 3
    assert "audit" not in document
    document = download(
        admin_client_, url("export_download", scope.pk), {"statuses": ["active", "archived"], "include_audit": "on"}
    )
    assert document["episodes"]["count"] == 4 and document["audit"]["count"] == len(document["audit"]["entries"])
    assert AuditEntry.objects.filter(operation="export", actor="user:admin").count() == 2


@pytest.mark.parametrize("data", [{}, {"statuses": ["gone"]}])
def test_it_answers_400_with_an_inline_error_to_a_bad_export_request(admin_client_, url, light_scope, data):
    response = admin_client_.post(url("export_download", light_scope.pk), data)
    assert response.status_code == 400 and b'class="field-error"' in response.content
    assert not AuditEntry.objects.filter(operation="export").exists()


def test_it_enforces_csrf_on_the_export(client_for, admin_user, url, light_scope):
    client = client_for(admin_user, enforce_csrf_checks=True)
    assert client.post(url("export_download", light_scope.pk), {"statuses": ["active"]}).status_code == 403


# --- import -------------------------------------------------------------------------------------


@pytest.fixture
def export_file(admin_client_, url, scope) -> SimpleUploadedFile:
    document = download(
        admin_client_, url("export_download", scope.pk), {"statuses": ["active", "archived", "superseded"]}
    )
    return SimpleUploadedFile("export.json", json.dumps(document).encode(), content_type="application/json")


def import_data(upload, **overrides):
    data = {
        "file": upload,
        "format": "memconsole",
        "bot_uuid": "bot-c",
        "session_name": "group_300",
        "isolation": "session",
    }
    data.update(overrides)
    return data


def test_it_shows_the_import_form_prefilled_from_a_scope(admin_client_, url, light_scope):
    response = admin_client_.get(url("import"), {"scope": light_scope.pk})
    assert response.status_code == 200
    page = response.content.decode()
    assert 'name="session_name" value="group_100"' in page and 'name="bot_uuid" value="bot-a"' in page
    assert 'enctype="multipart/form-data"' in page and '<label for="id_file">File</label>' in page


def test_it_dry_runs_an_import_then_imports_it(admin_client_, url, export_file):
    response = admin_client_.post(url("import"), import_data(export_file, dry_run="on"))
    assert response.status_code == 302  # at once, to the job's page
    response = follow_job(admin_client_, response)
    assert response.status_code == 200 and b"Dry run: nothing was written." in response.content
    assert not Episode.objects.filter(user_key="bot-c:group_300").exists()
    export_file.seek(0)
    response = admin_client_.post(url("import"), import_data(export_file))
    assert not Episode.objects.filter(user_key="bot-c:group_300").exists()  # not yet: the job is queued
    response = follow_job(admin_client_, response)
    page = response.content.decode()
    assert response.status_code == 200 and "The file was imported." in page
    assert Episode.objects.filter(user_key="bot-c:group_300").count() == 4
    target = Scope.objects.get(scope_key="bot-c:group_300")
    assertContains(response, f'href="{url("episodes", target.pk)}"')
    assert AuditEntry.objects.filter(operation="import", actor="user:admin").exists()


def test_it_answers_an_htmx_import_with_the_report_fragment(admin_client_, url, export_file):
    response = admin_client_.post(url("import"), import_data(export_file, dry_run="on"), **htmx("import-report"))
    assert response.status_code == 200 and response["HX-Redirect"].startswith("/jobs/")  # a full page navigation
    response = follow_job(admin_client_, response, **htmx("job"))
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="job"') and '<div id="import-report"' in html and "<html" not in html


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"format": "zip"}, b"Select a valid choice."),
        ({"bot_uuid": "bad bot"}, b"bot_uuid may not contain"),
        ({"isolation": "moon"}, b"Select a valid choice."),
        ({"file": None}, b"This field is required."),
    ],
)
def test_it_answers_400_with_a_clear_message_to_a_bad_import(admin_client_, url, export_file, overrides, message):
    data = import_data(export_file, **overrides)
    if data["file"] is None:
        del data["file"]
    response = admin_client_.post(url("import"), data)
    assert response.status_code == 400 and message in response.content
    assert not Episode.objects.filter(user_key="bot-c:group_300").exists()


def test_it_reports_a_bad_file_on_the_job_page_in_plain_words(admin_client_, url, export_file):
    response = admin_client_.post(url("import"), import_data(SimpleUploadedFile("bad.json", b"{not json")))
    response = follow_job(admin_client_, response)
    page = response.content.decode()
    assert response.status_code == 200 and "The job failed" in page and "line 1, column 2" in page
    assert not Episode.objects.filter(user_key="bot-c:group_300").exists()


def test_it_refuses_an_import_into_a_bot_outside_the_grants(admin_client_, admin_user, url, export_file):
    BotGrant.objects.create(user=admin_user, bot_uuid="bot-b")
    response = admin_client_.post(url("import"), import_data(export_file))
    assert response.status_code == 400 and b"You do not have access to this bot" in response.content
    assert not Episode.objects.filter(user_key="bot-c:group_300").exists()


def test_it_enforces_csrf_on_the_import(client_for, admin_user, url, light_scope):
    client = client_for(admin_user, enforce_csrf_checks=True)
    upload = SimpleUploadedFile("x.json", b"{}")
    assert client.post(url("import"), import_data(upload)).status_code == 403


# --- diagnostics --------------------------------------------------------------------------------


def test_it_shows_an_empty_diagnostics_page_with_the_button_for_operators(operator_client, viewer_client, url):
    response = operator_client.get(url("diagnostics"))
    assert response.status_code == 200
    page = response.content.decode()
    assert '<button type="submit">Run health check</button>' in page and "has not run yet" in page
    response = viewer_client.get(url("diagnostics"))
    assertNotContains(response, "Run health check</button>")


def test_it_runs_the_health_check_and_shows_cards_with_text_status(operator_client, viewer_client, url, light_scope):
    response = operator_client.post(url("diagnostics_run"))
    assert response.status_code == 302 and "/jobs/" in response["Location"]
    assert not HealthRun.objects.exists()  # queued, not run inside the request
    assert follow_job(operator_client, response).status_code == 200
    run = HealthRun.objects.get()
    assert AuditEntry.objects.filter(operation="health_check", actor="user:operator").exists()
    response = viewer_client.get(url("diagnostics"), {"scope": light_scope.pk})
    page = response.content.decode()
    for check in run.result["checks"]:
        assertContains(response, f"<h3>{check['id']} ")
    assert 'class="badge badge-' in page and (
        "OK</span>" in page or "Warning</span>" in page or "Failing</span>" in page
    )
    assert f'href="{url("episodes", light_scope.pk)}"' in page  # back to the scope it was opened from


def test_it_shows_the_health_check_in_the_readers_language(operator_client, url, light_scope):
    follow_job(operator_client, operator_client.post(url("diagnostics_run")))
    page = operator_client.get(url("diagnostics"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "数据库" in page and "可访问且已迁移" in page and "没有未完成的擦除" in page
    assert "每个金丝雀记忆空间的列表只显示它自己的金丝雀" in page
    assert "审计链验证通过" in page and "没有等待写入索引的向量" in page  # found in English by a crawl
    assert "the audit chain verifies" not in page and "no vector is waiting" not in page
    assert "is reachable and migrated" not in page and "no erasure is unfinished" not in page
    assert "位于 " in page and "的内嵌 Chroma" in page and "embedded Chroma at" not in page  # the index named too
    assert "Chroma integrado en" in operator_client.get(url("diagnostics"), HTTP_ACCEPT_LANGUAGE="es").content.decode()
    english = operator_client.get(url("diagnostics")).content.decode()
    assert "is reachable and migrated" in english and "Unfinished erasures" in english


def test_it_answers_an_htmx_health_run_with_the_job_fragment(operator_client, url):
    response = operator_client.post(url("diagnostics_run"), **htmx("health"))
    assert response.status_code == 200 and "/jobs/" in job_location(response)
    response = follow_job(operator_client, response, **htmx("job"))
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<div id="job"') and "<html" not in html
    assertContains(response, "Back to Diagnostics")
    assert not run_queued_jobs()


def test_it_offers_each_user_only_the_buttons_and_jobs_they_may_use(client_for, operator, viewer_client, url):
    BotGrant.objects.create(user=operator, bot_uuid="bot-b")  # an operator limited to one bot
    limited = client_for(operator)
    assert follow_job(limited, limited.post(url("diagnostics_run"))).status_code == 200  # their own health run
    system = Actor.system("tests")
    checked = jobs.create(jobs.HEALTH, scope="", bot_uuid="bot-b", actor=system, params={})
    imported = jobs.create(jobs.IMPORT, scope="", bot_uuid="bot-b", actor=system, params={})

    page = limited.get(url("diagnostics")).content.decode()
    assert "Run health check</button>" in page
    for install_wide in ("Repair the search index", "Finish a switch of embedding model now", "Re-encrypt"):
        assert install_wide not in page, install_wide
    assert page.count('href="/jobs/') == 2 and f'href="/jobs/{checked.pk}/"' in page  # and their own (no bot)
    assert f'href="/jobs/{imported.pk}/"' not in page  # an operator may not open an import
    viewer_page = viewer_client.get(url("diagnostics")).content.decode()
    assert f'href="/jobs/{imported.pk}/"' not in viewer_page  # a viewer may not open an import job
    assert viewer_client.get(f"/jobs/{imported.pk}/").status_code == 403


def test_a_user_limited_to_some_bots_reads_no_install_wide_detail(client_for, operator, operator_client, url):
    """The health check names rows, counts and paths of every bot (found by attacking as a limited
    admin: another bot's episode ids). A limited user sees each check's name and state only."""
    job = follow_job(operator_client, operator_client.post(url("diagnostics_run")))
    everything = operator_client.get(url("diagnostics")).content.decode()
    assert "is reachable and migrated" in everything  # a user of every bot reads the details
    BotGrant.objects.create(user=operator, bot_uuid="bot-b")
    limited = client_for(operator)

    page = limited.get(url("diagnostics")).content.decode()
    job_page = limited.get(job.request["PATH_INFO"]).content.decode()

    for shown in (page, job_page):
        assert "Its details are shown only to users who may see every bot." in shown
        assert "is reachable and migrated" not in shown and "How to fix" not in shown
    assert "<h3>database " in page  # the checks and their states are still there


def test_re_encryption_is_offered_only_with_a_key_to_seal_with(admin_client_, url, settings):
    """Found in the console: without keys the button started a job that could only fail."""
    assert "Re-encrypt under the newest key" not in admin_client_.get(url("diagnostics")).content.decode()
    refused = admin_client_.post(url("diagnostics_rotate"))
    assertContains(refused, "Nothing to re-encrypt under: set MEMCONSOLE_FERNET_KEYS", status_code=400)
    assert not jobs.Job.objects.filter(kind=jobs.ROTATION).exists()
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    assert "Re-encrypt under the newest key" in admin_client_.get(url("diagnostics")).content.decode()


def test_it_refuses_the_health_check_run_to_a_viewer(viewer_client, url):
    assert viewer_client.post(url("diagnostics_run")).status_code == 403
    assert not HealthRun.objects.exists()


def test_it_answers_400_to_a_bad_diagnostics_cursor(viewer_client, url):
    assert viewer_client.get(url("diagnostics"), {"cursor": "nope"}).status_code == 400


def test_it_enforces_csrf_on_the_health_check(client_for, operator, url):
    client = client_for(operator, enforce_csrf_checks=True)
    assert client.post(url("diagnostics_run")).status_code == 403
    assert not HealthRun.objects.exists()


@pytest.mark.parametrize("scope_id", ["²", "9" * 5000, "9" * 19, "-1", " 1"])
@pytest.mark.parametrize("page", ["import", "diagnostics"])
def test_it_ignores_a_scope_parameter_that_is_not_a_plain_id(admin_client_, url, light_scope, page, scope_id):
    response = admin_client_.get(url(page), {"scope": scope_id})
    assertNotContains(response, 'value="group_100"')
