"""Request ids, the access log and the JSON lines format."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from memconsole.observability.logs import JsonFormatter, RequestIdFilter, accepted_request_id, request_id
from tests import processes

SCRIPTS = Path(__file__).resolve().parent / "scripts"

pytestmark = pytest.mark.django_db


@pytest.fixture
def json_lines():
    """What memconsole's console handler would print with MEMCONSOLE_LOG_FORMAT=json, from every logger."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)


def test_it_returns_a_new_request_id_when_none_is_sent(client):
    first, second = client.get("/healthz")["X-Request-ID"], client.get("/healthz")["X-Request-ID"]
    assert len(first) == 32 and first != second


def test_it_keeps_a_short_safe_request_id_and_replaces_any_other(client):
    assert client.get("/healthz", headers={"X-Request-ID": "lb-7f3a.42:x_y"})["X-Request-ID"] == "lb-7f3a.42:x_y"
    for offered in ("has space", "a" * 65, "new\nline", "<script>", "é"):
        answered = client.get("/healthz", headers={"X-Request-ID": offered})["X-Request-ID"]
        assert answered != offered and len(answered) == 32


def test_it_puts_the_request_id_on_every_line_logged_during_the_request(client, json_lines):
    response = client.get("/no/such/page", headers={"X-Request-ID": "trace-me-1"})
    assert response.status_code == 404
    lines = json_lines()
    assert {line["logger"] for line in lines} >= {"memconsole.access", "django.request"}
    assert {line["request_id"] for line in lines} == {"trace-me-1"}
    assert request_id.get() == "-"  # nothing leaks into what runs after the request


def test_it_writes_method_route_status_and_latency_to_the_access_log(client, json_lines):
    client.get("/healthz?secret=do-not-log")
    (line,) = [line for line in json_lines() if line["logger"] == "memconsole.access"]
    assert line["method"] == "GET" and line["route"] == "healthz" and line["status"] == 200
    assert line["path"] == "/healthz" and "do-not-log" not in json.dumps(line)
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    assert line["level"] == "INFO" and line["time"].endswith("+00:00")


def test_a_line_break_in_the_url_cannot_forge_an_access_line(client, caplog):
    """Found by attacking the server: `%0a` in a path wrote a line of the attacker's own."""
    forged = "/x%0a2026-12-03 14:41:00,000 INFO memconsole.access [0123abcd]: POST /api/v1/forget 200 1.0 ms%0d%0a"
    with caplog.at_level(logging.INFO, logger="memconsole.access"):
        client.get(forged)
    (record,) = [r for r in caplog.records if r.name == "memconsole.access"]
    text = record.getMessage()
    assert "\n" not in text and "\r" not in text and text.startswith("GET /x\\n2026-12-03")
    assert text.endswith(" ms") and text.count(" 404 ") == 1


def test_it_can_leave_the_access_log_out(client, settings, json_lines):
    settings.MEMCONSOLE_ACCESS_LOG = False
    client.get("/healthz")
    assert [line for line in json_lines() if line["logger"] == "memconsole.access"] == []


def test_it_formats_extra_fields_and_exceptions_as_json():
    record = logging.LogRecord("memconsole.x", logging.ERROR, __file__, 1, "failed %s", ("once",), None)
    record.scope_id, record.request = 7, object()  # the request object itself is never written
    try:
        raise ValueError("boom")
    except ValueError:
        record.exc_info = sys.exc_info()
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "failed once" and line["scope_id"] == 7 and line["request_id"] == "-"
    assert "ValueError: boom" in line["exception"] and "request" not in line


def test_it_accepts_only_short_safe_request_ids():
    assert accepted_request_id("abc") == "abc"
    assert accepted_request_id(None) != accepted_request_id(None)


def _log_from_manage(tmp_path, **settings: str) -> subprocess.CompletedProcess:
    env = processes.clean_env(MEMCONSOLE_VAR_DIR=tmp_path, **settings)
    return processes.run_script(SCRIPTS / "log_line.py", env, timeout=120)


def test_it_switches_every_line_to_json_with_the_setting(tmp_path):
    result = _log_from_manage(tmp_path, MEMCONSOLE_LOG_FORMAT="json")
    assert result.returncode == 0, result.stderr
    (line,) = [json.loads(text) for text in result.stderr.splitlines() if "memconsole.check" in text]
    assert line["message"] == "hello there" and line["level"] == "WARNING" and line["request_id"] == "-"
    plain = _log_from_manage(tmp_path)
    assert "WARNING memconsole.check [-]: hello there" in plain.stderr


def test_it_refuses_an_unknown_log_format(tmp_path):
    result = subprocess.run(
        [sys.executable, str(processes.MANAGE), "check"],
        cwd=processes.REPO,
        env=processes.clean_env(MEMCONSOLE_VAR_DIR=tmp_path, MEMCONSOLE_LOG_FORMAT="xml"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "MEMCONSOLE_LOG_FORMAT='xml' must be 'plain' or 'json'" in result.stderr
