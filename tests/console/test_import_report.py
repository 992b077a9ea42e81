"""The console's import report (issue 14): it lists conflicts, the episodes skipped because the
source had deleted them, and the warnings of what was adjusted; it never shows a green "imported"
when nothing was written."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from pytest_django.asserts import assertContains, assertNotContains

from memconsole.memory.models import Episode
from tests.jobs.work import follow_job

from .conftest import htmx

pytestmark = pytest.mark.django_db

CHINESE = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}
SPANISH = {"HTTP_ACCEPT_LANGUAGE": "es"}


def langbot_upload() -> SimpleUploadedFile:
    document = {
        "version": 1,
        "scope_key": "old-bot:group_300",
        "statuses": ["active", "superseded", "archived", "deleted"],
        "episodes": [
            {"id": "lb-keep", "content": "Alice likes green tea", "importance": 9, "status": "active"},
            {"id": "lb-gone", "content": "Alice's phone number", "status": "deleted"},
            {"id": "lb-odd", "content": "Bob's plan", "status": "pending-review", "timestamp": ""},
        ],
    }
    return SimpleUploadedFile("langbot.json", json.dumps(document).encode(), content_type="application/json")


def import_data(upload, **overrides):
    data = {"file": upload, "format": "langbot", "bot_uuid": "bot-c", "session_name": "", "isolation": "session"}
    data.update(overrides)
    return data


def rows(html: str, table_id: str) -> list[str]:
    table = re.search(rf'<table class="data stack" aria-labelledby="{table_id}">.*?</table>', html, re.S)
    assert table, table_id
    return re.findall(r"<tr>(.*?)</tr>", table.group(0).split("<tbody>")[1], re.S)


def test_it_lists_skipped_deleted_episodes_and_warnings(admin_client_, url):
    response = follow_job(admin_client_, admin_client_.post(url("import"), import_data(langbot_upload())))

    html = response.content.decode()
    assert response.status_code == 200 and "The file was imported." in html
    assert set(Episode.objects.values_list("imported_episode_id", flat=True)) == {"lb-keep", "lb-odd"}
    assertContains(response, "Some items were skipped or adjusted; each one is listed below.")
    assert "<dt>Deleted in the source (skipped)</dt><dd>1</dd>" in html and "<dt>Warnings</dt><dd>3</dd>" in html
    skipped = rows(html, "import-skipped")
    assert len(skipped) == 1 and "episodes[1]" in skipped[0] and "<code>lb-gone</code>" in skipped[0]
    assert "Deleted in the source" in skipped[0]
    warnings = rows(html, "import-warnings")
    assert [re.search(r"<code>(.*?)</code>", row).group(1) for row in warnings] == ["lb-keep", "lb-odd", "lb-odd"]
    assert "Importance clamped to 1–5" in warnings[0] and "importance 9 is outside 1-5; stored as 5" in warnings[0]
    assert "Empty time: the import time is used" in warnings[1]
    assert "Unknown status: imported as active" in warnings[2] and "&#x27;pending-review&#x27;" in warnings[2]
    assert 'data-label="Details"' in warnings[0]


def test_it_lists_the_same_in_a_dry_run(admin_client_, url):
    response = admin_client_.post(url("import"), import_data(langbot_upload(), dry_run="on"), **htmx("import-report"))
    response = follow_job(admin_client_, response, **htmx("job"))

    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html and "Dry run: nothing was written." in html
    assert len(rows(html, "import-skipped")) == 1 and len(rows(html, "import-warnings")) == 3
    assert not Episode.objects.exists()


def test_it_does_not_say_imported_when_nothing_was_written(admin_client_, url):
    follow_job(admin_client_, admin_client_.post(url("import"), import_data(langbot_upload())))

    response = follow_job(admin_client_, admin_client_.post(url("import"), import_data(langbot_upload())))

    html = response.content.decode()
    assert response.status_code == 200 and "The file was imported." not in html
    assertNotContains(response, "message-success")
    assertContains(response, "Nothing new was imported: no episode or profile in the file was written.")
    assertContains(response, "<dt>Conflicts (skipped)</dt><dd>2</dd>")
    conflicts = rows(html, "import-conflicts")
    assert [re.search(r"<code>(.*?)</code>", row).group(1) for row in conflicts] == ["lb-keep", "lb-odd"]
    assert all("Already in the memory space" in row and "already in the target scope" in row for row in conflicts)
    assert len(rows(html, "import-skipped")) == 1
    assert Episode.objects.count() == 2


def test_it_gives_the_reason_for_each_conflict_in_the_readers_language(admin_client_, url):
    follow_job(admin_client_, admin_client_.post(url("import"), import_data(langbot_upload())))

    response = admin_client_.post(url("import"), import_data(langbot_upload()), **CHINESE)
    html = follow_job(admin_client_, response, **CHINESE).content.decode()

    conflicts = rows(html, "import-conflicts")
    assert len(conflicts) == 2 and all("已在目标空间中；已跳过" in row for row in conflicts), conflicts
    assert "already in the target scope" not in html


CHINESE_REPORT = ["已跳过：在来源中已删除", "警告", "重要性已限制在 1–5", "未知状态：按活跃导入"]
SPANISH_REPORT = ["Omitidos: borrados en el origen", "Avisos", "Importancia ajustada a 1–5", "Estado desconocido"]


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        # the labels, and each warning's own words
        (CHINESE, [*CHINESE_REPORT, "未知状态 &#x27;pending-review&#x27;；按活跃导入", "timestamp 为空；使用导入时间"]),
        (SPANISH, [*SPANISH_REPORT, "estado desconocido &#x27;pending-review&#x27;; importado como activo"]),
    ],
)
def test_it_translates_the_report(admin_client_, url, language, expected):
    response = admin_client_.post(url("import"), import_data(langbot_upload(), dry_run="on"), **language)
    response = follow_job(admin_client_, response, **language)

    for text in expected:
        assertContains(response, text)


def test_a_job_page_shows_what_was_imported_and_offers_to_import_it_again(admin_client_, url):
    dry_run = import_data(langbot_upload(), dry_run="on")
    page = follow_job(admin_client_, admin_client_.post(url("import"), dry_run)).content.decode()
    assert '<dd id="job-file">langbot.json</dd>' in page and "<code>langbot</code>" in page
    assert "<code>bot-c</code>" in page and "yes: nothing is written" in page
    link = re.search(r'<a class="button" id="import-again" href="([^"]+)">Import it for real…</a>', page)
    assert link, "a dry run that went well offers the real import"
    form = admin_client_.get(link.group(1).replace("&amp;", "&")).content.decode()
    assert 'name="bot_uuid" value="bot-c"' in form and '<option value="langbot" selected>' in form
    dry_run_box = re.search(r'<input type="checkbox" name="dry_run"[^>]*>', form).group(0)
    assert "checked" not in dry_run_box  # for real this time

    broken = SimpleUploadedFile("broken.json", b"{", content_type="application/json")
    failed = follow_job(admin_client_, admin_client_.post(url("import"), import_data(broken)))
    assert "Import again with these settings…" in failed.content.decode()
