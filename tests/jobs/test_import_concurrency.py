"""Other writers get in while a large import job writes (issue 21): memconsole served the way
`make run` serves it (gunicorn, one worker, file SQLite, embedded Chroma, the job worker inside the
web process) imports a few thousand episodes as a job, while a bot keeps calling `remember` over
HTTP and a logged-in admin keeps opening the console (each console request writes its session).
SQLite has one writer at a time; the import writes in batches and frees the lock between them, so
every request answers 2xx, and some answer while the import has committed part of the file and not
the rest (with one write transaction the import is all or nothing, and every request waits for its
commit). No timing is asserted."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.chroma_server import free_port
from tests.conftest import MODEL_DIR
from tests.processes import GUNICORN, LOOPBACK, MANAGE, REPO, clean_env, run_script

SCRIPTS = Path(__file__).resolve().parent / "scripts"
EPISODES = 5000  # 25 batches (imports.writer.JOB_BATCH)
PASSWORD = "correct-horse-battery-staple"


@dataclass
class Served:
    url: str
    database: Path
    env: dict[str, str]
    token: str
    log: Path


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    database = tmp_path / "db.sqlite3"
    env = clean_env(
        DJANGO_SETTINGS_MODULE="memconsole.settings",
        PYTHONPATH=REPO,
        DATABASE_URL=f"sqlite:///{database}",
        CHROMA_PATH=tmp_path / "chroma",
        MEMCONSOLE_MODEL_DIR=MODEL_DIR,
        MEMCONSOLE_VAR_DIR=tmp_path / "var",
        SECRET_KEY="import-concurrency-" + "s" * 40,
        MEMCONSOLE_AUDIT_KEY="import-concurrency-audit-key",
        MEMCONSOLE_LOG_LEVEL="WARNING",
        WEB_CONCURRENCY=1,
    )
    migrated = subprocess.run(
        [sys.executable, str(MANAGE), "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env, capture_output=True
    )
    assert migrated.returncode == 0, migrated.stderr
    assert run_script(SCRIPTS / "create_admin.py", env, {"username": "admin", "password": PASSWORD}).returncode == 0
    created = run_script(SCRIPTS / "create_token.py", env, {"bot": "bot-live"})
    assert created.returncode == 0, created.stderr
    port = free_port()
    log_path = tmp_path / "gunicorn.log"
    log = log_path.open("wb")
    args = [str(GUNICORN), "memconsole.wsgi", "-c", "python:memconsole.gunicorn_config", "-b", f"{LOOPBACK}:{port}"]
    server = subprocess.Popen(args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://{LOOPBACK}:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert server.poll() is None, log_path.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        yield Served(url, database, env, json.loads(created.stdout)["token"], log_path)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        log.close()


def remember(served: Served, number: int) -> int:
    body = {"bot_uuid": "bot-live", "session_name": "group_live", "content": f"live note number {number}"}
    request = urllib.request.Request(
        f"{served.url}/api/v1/remember",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {served.token}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def console(served: Served) -> urllib.request.OpenerDirector:
    """An opener logged into the console as the admin (its cookies kept)."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    with opener.open(f"{served.url}/accounts/login/", timeout=60) as response:
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.read().decode())
    assert token, "no CSRF token on the login page"
    form = {"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)}
    with opener.open(f"{served.url}/accounts/login/", data=urllib.parse.urlencode(form).encode(), timeout=60) as page:
        assert page.url.rstrip("/") == served.url, page.url  # logged in: sent to the overview
    return opener


def open_page(opener: urllib.request.OpenerDirector, url: str) -> int:
    try:
        with opener.open(url, timeout=120) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def query(database: Path, sql: str, *args: Any) -> Any:
    connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return connection.execute(sql, args).fetchone()
    finally:
        connection.close()


def job_state(served: Served, job_id: str) -> tuple[str, str]:
    status, stage = query(served.database, "SELECT status, stage FROM memory_job WHERE id = ?", job_id.replace("-", ""))
    return status, stage


def bulk_written(served: Served) -> int:
    return int(query(served.database, "SELECT COUNT(*) FROM memory_episode WHERE bot_uuid = 'bot-bulk'")[0])


def test_it_answers_the_bot_api_and_the_console_while_an_import_job_writes(served: Served, tmp_path: Path) -> None:
    admin = console(served)
    assert remember(served, 0) == 201  # the embedding model loaded before the import starts
    upload = tmp_path / "bulk.json"
    episodes = [{"id": f"b{i}", "content": f"bulk fact {i} about topic {i % 50}"} for i in range(EPISODES)]
    upload.write_text(json.dumps({"version": 1, "scope_key": "old:group_bulk", "episodes": episodes}))
    payload = {
        "kind": "import",
        "scope": "bot-bulk:group_bulk:session",
        "bot_uuid": "bot-bulk",
        "params": {"format": "langbot", "bot_uuid": "bot-bulk", "session_name": "group_bulk", "isolation": "session"},
        "file": str(upload),
    }
    submitted = run_script(SCRIPTS / "submit_job.py", served.env, payload)
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["job_id"]

    answers: list[tuple[str, int]] = []
    while_writing = {"remember": 0, "console": 0}
    deadline = time.monotonic() + 300
    number = 0
    while time.monotonic() < deadline:
        status, stage = job_state(served, job_id)
        if status not in {"queued", "running"} or stage == "indexing":
            break
        number += 1
        for name in ("remember", "console"):
            answers.append(
                (name, remember(served, number) if name == "remember" else open_page(admin, served.url + "/"))
            )
            written = bulk_written(served)
            if 0 < written < EPISODES and job_state(served, job_id)[0] == "running":
                while_writing[name] += 1  # answered between two of the import's batches
    else:
        pytest.fail(f"the import never got past writing: {job_state(served, job_id)}")

    failed = [answer for answer in answers if answer[1] not in {200, 201}]
    assert not failed, (failed, served.log.read_text()[-3000:])
    assert while_writing["remember"] >= 1 and while_writing["console"] >= 1, (while_writing, len(answers))
    remembered = query(served.database, "SELECT COUNT(*) FROM memory_episode WHERE bot_uuid = 'bot-live'")[0]
    assert remembered == number + 1  # each remember stored once
    bulk = query(
        served.database,
        "SELECT COUNT(*), COUNT(DISTINCT imported_episode_id) FROM memory_episode WHERE bot_uuid = 'bot-bulk'",
    )
    assert tuple(bulk) == (EPISODES, EPISODES), bulk  # and the import wrote the whole file, once
