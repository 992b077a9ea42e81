"""Hostile imports: bombs, compressed payloads, hostile SQLite files, path traversal in file names.

memconsole reads JSON exports (memconsole, langbot) and SQLite files (jw-agents, bot-memory); it
accepts no compressed input, so a gzip or zip file (bomb or not) is refused unread. Whatever the
file, the import is rejected whole with a clear message and nothing is written, in bounded time;
the uploaded file's name is only ever shown (cleaned), never used as a path.
"""

from __future__ import annotations

import gzip
import io
import json
import sqlite3
import subprocess
import tempfile
import time
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memconsole.memory import imports
from memconsole.memory.errors import ValidationError
from memconsole.memory.models import AuditEntry, Episode
from tests.jobs.work import follow_job

from .conftest import MANAGE, PYTHON, REPO, record_figure
from .hostile import anything, hostile_text, rows

pytestmark = pytest.mark.django_db

TARGET = {"bot_uuid": "bot-a", "session_name": "group_100", "isolation": "session"}
BOUND_SECONDS = 15  # generous for a loaded 2-core CI machine; each case takes well under a second alone


def run_import(path: Path, system, fmt: str = "langbot", **extra):
    return imports.import_file(path, fmt, actor=system, **{**TARGET, **extra})


def envelope(episodes: list) -> dict:
    return {"version": 1, "scope_key": "bot-a:group_old", "episodes": episodes, "count": len(episodes)}


def refused_quickly(path: Path, system, fmt: str = "langbot", **extra) -> str:
    before = rows()
    started = time.monotonic()
    with pytest.raises(ValidationError) as refused:
        run_import(path, system, fmt, **extra)
    elapsed = time.monotonic() - started
    assert elapsed < BOUND_SECONDS, f"{path.name}: {elapsed:.1f} s"
    assert rows() == before
    assert refused.value.message
    record_figure("hostile_input", "import_named_cases", 1)
    return refused.value.message


# --- JSON bombs and malformed numbers -----------------------------------------------------------

JSON_BOMBS = {
    "nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
    "nested inside an episode": '{"version": 1, "episodes": [{"content": ' + "[" * 3000 + "]" * 3000 + "}]}",
    "200,000 empty episodes": json.dumps(envelope([{}] * 200_000)),
    "a 2 MB content": json.dumps(envelope([{"content": "x" * 2_000_000}])),
    "NaN": '{"version": 1, "scope_key": "a:b", "episodes": [{"content": "x", "importance": NaN}]}',
    "Infinity": '{"version": 1, "scope_key": "a:b", "episodes": [{"content": "x", "timestamp": -Infinity}]}',
    "1e999": '{"version": 1, "scope_key": "a:b", "episodes": [{"content": "x", "importance": 1e999}]}',
    "a 5,000-digit number": '{"version": 1, "episodes": [{"content": "x", "importance": ' + "9" * 5000 + "}]}",
    # Issue 14: an importance out of 1-5 (e.g. -3) is clamped with a warning; a non-integer still refuses the file.
    "fractional importance": json.dumps(envelope([{"content": "x", "importance": 2.5}])),
    "operator object as content": json.dumps(envelope([{"content": {"$ne": ""}}])),
    "operator object as tags": json.dumps(envelope([{"content": "x", "tags": [{"$gt": ""}]}])),
    "lone surrogate": '{"version": 1, "episodes": [{"content": "ok", "sender_id": "\\udc00"}]}',
    "NUL": json.dumps(envelope([{"content": "a\x00b"}])),
    "episodes as an object": json.dumps({"version": 1, "episodes": {"$where": "1"}}),
    "not JSON": "<script>alert(1)</script>",
    "truncated": json.dumps(envelope([{"content": "x"}]))[:-3],
}


@pytest.mark.parametrize("name", sorted(JSON_BOMBS))
def test_it_refuses_json_bombs_and_bad_numbers_whole_and_quickly(tmp_path, system, name):
    path = tmp_path / "bomb.json"
    path.write_text(JSON_BOMBS[name], encoding="utf-8", errors="surrogatepass")
    refused_quickly(path, system)


def test_it_refuses_a_file_over_the_size_limit_before_reading_it(tmp_path, system, settings):
    settings.MEMCONSOLE_IMPORT_MAX_BYTES = 4096
    path = tmp_path / "big.json"
    path.write_text(json.dumps(envelope([{"content": f"fact {i}"} for i in range(500)])))
    assert "limit" in refused_quickly(path, system)


# --- compressed payloads: not accepted, so never decompressed -----------------------------------


def _valid_export() -> bytes:
    return json.dumps(envelope([{"id": "e1", "content": "a fact worth keeping"}])).encode()


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


COMPRESSED = {
    "gzip of a valid export": lambda: gzip.compress(_valid_export()),
    "zip of a valid export": lambda: _zip({"export.json": _valid_export()}),
    "gzip bomb (200 MB of zeros)": lambda: gzip.compress(b"\0" * 200_000_000, compresslevel=9),
    "zip bomb (200 MB of brackets)": lambda: _zip({"a.json": b"[" * 200_000_000}),
    "zip with a traversal member name": lambda: _zip({"../../evil.json": _valid_export()}),
}


@pytest.mark.parametrize("name", sorted(COMPRESSED))
@pytest.mark.parametrize("fmt", ["langbot", "memconsole", "jw-agents"])
def test_it_refuses_compressed_files_without_decompressing_them(tmp_path, system, name, fmt):
    payload = COMPRESSED[name]()
    assert len(payload) < 1_000_000  # the bombs are small on disk
    path = tmp_path / "upload.bin"
    path.write_bytes(payload)
    refused_quickly(path, system, fmt)
    assert not (tmp_path.parent / "evil.json").exists() and not Path("../../evil.json").exists()


# --- hostile SQLite files -----------------------------------------------------------------------

JW_COLUMNS = (
    "id INTEGER PRIMARY KEY, session_id TEXT, timestamp TEXT, kind TEXT, content TEXT, metadata TEXT, encrypted INTEGER"
)
JW_SELECT = "'group_1' AS session_id, '2024-01-01T00:00:00Z' AS timestamp, 'fact' AS kind, 'c' AS content, '{}' AS metadata, 0 AS encrypted"
SQLITE_BOMBS = {
    # An endless recursive view: every read of `records` would run forever.
    "endless recursive view": [
        f"CREATE VIEW records AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT x AS id, {JW_SELECT} FROM n"
    ],
    # A view making a 900 MB blob per row out of nothing.
    "blob-bomb view": [
        f"CREATE VIEW records AS SELECT 1 AS id, {JW_SELECT.replace(chr(39) + 'c' + chr(39), 'zeroblob(900000000)')}"
    ],
    "generated blob column": [
        (
            "CREATE TABLE records (id INTEGER PRIMARY KEY, session_id TEXT, timestamp TEXT, kind TEXT, metadata TEXT, "
            "encrypted INTEGER, content BLOB GENERATED ALWAYS AS (zeroblob(900000000)) VIRTUAL)"
        ),
        "INSERT INTO records (id, session_id, timestamp, kind, metadata, encrypted) VALUES (1, 'g_1', '2024-01-01', 'f', '{}', 0)",
    ],
    "records in an attached temp name": [
        "CREATE TABLE other (x)",
        f"CREATE VIEW RECORDS AS SELECT 1 AS id, {JW_SELECT}",
    ],
    "deep JSON metadata": [
        f"CREATE TABLE records ({JW_COLUMNS})",
        "INSERT INTO records VALUES (1, 'group_1', '2024-01-01T00:00:00Z', 'fact', 'c', '"
        + "[" * 100_000
        + "]" * 100_000
        + "', 0)",
    ],
    "a 2 MB content": [
        f"CREATE TABLE records ({JW_COLUMNS})",
        "INSERT INTO records VALUES (1, 'group_1', '2024-01-01T00:00:00Z', 'fact', hex(zeroblob(1000000)), '{}', 0)",
    ],
    "content that is not UTF-8": [
        f"CREATE TABLE records ({JW_COLUMNS})",
        "INSERT INTO records VALUES (1, 'group_1', '2024-01-01T00:00:00Z', 'fact', CAST(x'fffe41' AS TEXT), '{}', 0)",
    ],
    "session name with a control character": [
        f"CREATE TABLE records ({JW_COLUMNS})",
        "INSERT INTO records VALUES (1, 'group' || char(27) || '[2J', '2024-01-01T00:00:00Z', 'fact', 'c', '{}', 0)",
    ],
}


def sqlite_file(path: Path, statements: list[str]) -> Path:
    connection = sqlite3.connect(path)
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()
    return path


@pytest.mark.parametrize("name", sorted(SQLITE_BOMBS))
def test_it_refuses_hostile_sqlite_files(tmp_path, system, name):
    path = sqlite_file(tmp_path / "memory.db", SQLITE_BOMBS[name])
    refused_quickly(path, system, "jw-agents")


def test_it_keeps_a_session_name_that_looks_like_a_path_as_plain_data(tmp_path, system):
    path = sqlite_file(
        tmp_path / "memory.db",
        [
            f"CREATE TABLE records ({JW_COLUMNS})",
            "INSERT INTO records VALUES (1, '../../../etc/passwd', '2024-01-01T00:00:00Z', 'fact', 'c', '{}', 0)",
        ],
    )
    report = run_import(path, system, "jw-agents", session_name=None)
    assert [scope["session_name"] for scope in report.scopes.values()] == ["../../../etc/passwd"]
    assert Episode.objects.get().scope_key == "bot-a:../../../etc/passwd"


def test_it_refuses_an_endless_view_through_the_real_command_in_bounded_time(template_site, tmp_path):
    """The same bomb through `manage.py import_memory`, as an operator would run it (a subprocess,
    so that a regression fails on the timeout instead of hanging the suite)."""
    site = template_site.copy_to(tmp_path / "site")
    path = sqlite_file(tmp_path / "memory.db", SQLITE_BOMBS["endless recursive view"])
    started = time.monotonic()
    result = subprocess.run(
        [
            PYTHON,
            str(MANAGE),
            "import_memory",
            str(path),
            "--format",
            "jw-agents",
            "--bot-uuid",
            "bot-a",
            "--isolation",
            "session",
        ],
        cwd=REPO,
        env=site.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "is not an ordinary table; nothing was imported" in result.stderr
    assert time.monotonic() - started < 120
    record_figure("hostile_input", "import_named_cases", 1)


# --- random hostile records ---------------------------------------------------------------------


def test_it_imports_exactly_what_it_accepts_or_nothing(tmp_path, system):
    outcomes: Counter[str] = Counter()
    record = st.fixed_dictionaries(
        {"content": st.one_of(hostile_text, hostile_text, anything)},
        optional={
            "id": st.one_of(hostile_text, st.integers(), anything),
            "tags": st.one_of(st.lists(hostile_text, max_size=3), hostile_text, anything),
            "importance": st.one_of(st.integers(min_value=-2, max_value=7), hostile_text, anything),
            "timestamp": st.one_of(st.integers(), st.floats(), hostile_text, anything),
            "sender_id": st.one_of(hostile_text, anything),
            "status": st.one_of(st.sampled_from(["active", "archived", "superseded", "$ne"]), anything),
            "superseded_by": st.one_of(hostile_text, anything),
        },
    )

    @hypothesis_settings(
        max_examples=40,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    )
    @given(records=st.lists(record, min_size=1, max_size=3))
    def check(records):
        path = tmp_path / "hostile.json"
        text = json.dumps(envelope(records), default=repr)  # non-JSON values become their repr
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        before = rows()
        try:
            report = run_import(path, system)
        except ValidationError:
            assert rows() == before
            outcomes["refused"] += 1
            return
        outcomes["imported"] += 1
        new = Episode.objects.filter(source="import").order_by("-id")[: report.episodes]
        written = {e.content for e in new}
        # Numbers are accepted where LangBot files may carry them (ids), as their text; a content must be
        # a string, and it is stored trimmed (issue 14).
        sent = {r["content"].strip() for r in json.loads(text)["episodes"] if isinstance(r["content"], str)}
        assert written <= sent  # exactly the given text, nothing made up
        assert rows()["Episode"] == before["Episode"] + report.episodes

    check()
    assert outcomes["refused"] and outcomes["imported"], outcomes
    record_figure("hostile_input", "import_records", dict(outcomes))


# --- the uploaded file's name is never a path ---------------------------------------------------

TRAVERSAL_NAMES = [
    "../../../tmp/pwned.json",
    "..\\..\\..\\pwned.json",
    "/etc/passwd",
    "C:\\Windows\\win.ini",
    "%2e%2e%2f%2e%2e%2fpwned.json",
    "pwned.json\x00.png",
    "....//....//pwned.json",
    "<script>alert(1)</script>.json",
    "x" * 5000 + ".json",
    "\u202enosj.exe",
    "",
]


class RawUpload:
    """An uploaded file exactly as a client named it (Django's own UploadedFile would clean the name)."""

    def __init__(self, name: str, data: bytes) -> None:
        self.name, self.size, self._data = name, len(data), data

    def chunks(self):
        yield self._data


@pytest.mark.parametrize("name", TRAVERSAL_NAMES, ids=range(len(TRAVERSAL_NAMES)))
def test_it_never_uses_the_uploaded_name_as_a_path(tmp_path, system, name, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    target = name.replace("/tmp/", f"{tmp_path}/") if name.startswith("../") else name
    report = imports.import_upload(RawUpload(target, _valid_export()), "langbot", actor=system, **TARGET)

    assert report.episodes == 1
    assert "/" not in report.file_name and "\\" not in report.file_name and "\x00" not in report.file_name
    assert len(report.file_name) <= 120
    entry = AuditEntry.objects.filter(operation="import").latest("id")
    assert entry.payload["metadata"]["file_name"] == report.file_name
    assert list((tmp_path / "tmp").iterdir()) == []  # the private copy is gone, and nothing else was made
    assert not (tmp_path / "pwned.json").exists() and not Path("/tmp/pwned.json").exists()
    record_figure("hostile_input", "import_file_names", 1)


def test_it_cleans_the_name_of_a_console_upload_too(admin_client_, tmp_path):
    upload = SimpleUploadedFile("../../<b>evil</b>.json", _valid_export(), content_type="application/json")
    started = admin_client_.post("/import/", {"file": upload, "format": "langbot", **TARGET, "dry_run": ""})
    response = follow_job(admin_client_, started)  # an import runs as a job (issue 21); its page reports
    assert response.status_code == 200, response.content[:500]
    page = response.content.decode()
    assert "<b>evil</b>" not in page and "../" not in page.split("File</dt>")[1][:200]
    assert Episode.objects.filter(source="import").count() == 1
    record_figure("hostile_input", "import_file_names", 1)
