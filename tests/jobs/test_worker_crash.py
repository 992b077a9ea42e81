"""A job worker killed with SIGKILL mid-job (issue 21): the real `manage.py jobs_worker` runs an
import of a few thousand episodes against a file SQLite database; it is killed in the middle, a
new worker starts, finds the job's heartbeat stale, resumes it and finishes it: every episode
exactly once. With no worker left to resume it, the job page tells how to finish it."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MODEL_DIR
from tests.processes import MANAGE, REPO, clean_env, run_script

SCRIPTS = Path(__file__).resolve().parent / "scripts"
EPISODES = 1500
STALE = 3  # MEMCONSOLE_JOBS_STALE_SECONDS for these workers


def site_env(root: Path) -> dict[str, str]:
    env = clean_env(
        DJANGO_SETTINGS_MODULE="memconsole.settings",
        DATABASE_URL=f"sqlite:///{root / 'db.sqlite3'}",
        CHROMA_PATH=root / "chroma",
        MEMCONSOLE_MODEL_DIR=MODEL_DIR,
        MEMCONSOLE_VAR_DIR=root / "var",
        SECRET_KEY="jobs-crash-" + "s" * 40,
        MEMCONSOLE_AUDIT_KEY="jobs-crash-audit-key",
        MEMCONSOLE_JOBS_STALE_SECONDS=STALE,
        MEMCONSOLE_LOG_LEVEL="WARNING",
    )
    env["PYTHONPATH"] = str(REPO)
    return env


def job_row(database: Path, job_id: str) -> dict[str, Any]:
    connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, timeout=30)
    connection.row_factory = sqlite3.Row
    try:
        row = connection.execute(
            "SELECT status, stage, done, total, attempts, note, worker, error FROM memory_job WHERE id = ?",
            (job_id.replace("-", ""),),
        ).fetchone()
        episodes = connection.execute("SELECT COUNT(*) FROM memory_episode WHERE bot_uuid = 'crash-bot'").fetchone()[0]
    finally:
        connection.close()
    return {**dict(row), "episodes": episodes}


def wait_for(database: Path, job_id: str, done: Any, timeout: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = job_row(database, job_id)
        if done(row):
            return row
        time.sleep(0.1)
    pytest.fail(f"job {job_id} never reached the expected state: {job_row(database, job_id)}")


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(MANAGE), "jobs_worker", "--interval", "0.2"],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def kill_hard(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


@pytest.fixture
def site(tmp_path: Path) -> tuple[dict[str, str], Path, str]:
    env = site_env(tmp_path)
    migrated = subprocess.run(
        [sys.executable, str(MANAGE), "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env, capture_output=True
    )
    assert migrated.returncode == 0, migrated.stderr
    upload = tmp_path / "memory.json"
    episodes = [
        {"id": f"e{i}", "content": f"fact {i} about topic {i % 40}", "status": "active"} for i in range(EPISODES)
    ]
    upload.write_text(json.dumps({"version": 1, "scope_key": "old:group_1", "episodes": episodes}))
    payload = {
        "kind": "import",
        "scope": "crash-bot:group_1:session",
        "bot_uuid": "crash-bot",
        "params": {"format": "langbot", "bot_uuid": "crash-bot", "session_name": "group_1", "isolation": "session"},
        "file": str(upload),
    }
    submitted = run_script(SCRIPTS / "submit_job.py", env, payload)
    assert submitted.returncode == 0, submitted.stderr
    return env, tmp_path / "db.sqlite3", json.loads(submitted.stdout)["job_id"]


def test_it_resumes_a_job_whose_worker_was_killed_mid_job(site, tmp_path):
    env, database, job_id = site
    log = tmp_path / "worker.log"
    first = start_worker(env, log)
    try:
        killed_at = wait_for(database, job_id, lambda row: row["stage"] == "indexing" and row["done"] > 0)
    finally:
        kill_hard(first)
    assert killed_at["status"] == "running" and killed_at["done"] < EPISODES, killed_at

    second = start_worker(env, log)
    try:
        finished = wait_for(database, job_id, lambda row: row["status"] in {"succeeded", "failed", "interrupted"})
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
    assert finished["status"] == "succeeded", (finished["error"], log.read_text()[-3000:])
    assert finished["attempts"] == 2 and "resumed after its worker stopped" in finished["note"]
    assert finished["episodes"] == EPISODES  # every episode once: the resumed attempt only indexes
    check = subprocess.run(
        [sys.executable, str(MANAGE), "reindex", "--check"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr  # and every one of them is in the index


def test_it_reports_a_killed_job_as_interrupted_with_the_command_that_finishes_it(site, tmp_path):
    env, database, job_id = site
    log = tmp_path / "worker.log"
    for attempt in range(1, 4):  # jobs.MAX_ATTEMPTS: each new worker resumes the job, and is killed too
        worker = start_worker(env, log)
        try:
            wait_for(database, job_id, lambda row, n=attempt: row["status"] == "running" and row["attempts"] == n)
        finally:
            kill_hard(worker)
    last = start_worker(env, log)  # finds the job's third worker gone: interrupted, not resumed again
    try:
        row = wait_for(database, job_id, lambda row: row["status"] != "running")
    finally:
        kill_hard(last)
    assert row["status"] == "interrupted" and f"manage.py resume_job {job_id}" in row["note"], row
    assert row["episodes"] == 0  # all or nothing: no killed attempt wrote anything

    resumed = subprocess.run(
        [sys.executable, str(MANAGE), "resume_job", job_id], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "succeeded" in resumed.stdout and job_row(database, job_id)["episodes"] == EPISODES
    assert "indexing: 1500/1500" in resumed.stderr  # progress on stderr (plain lines: not a terminal)
