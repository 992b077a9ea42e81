"""A job worker killed with SIGKILL mid-job (issue 21): the real `manage.py jobs_worker` runs an
import of a few thousand episodes against a file SQLite database; it is killed in the middle, a
new worker starts, finds the job's heartbeat stale, resumes it and finishes it: every episode
exactly once. The import writes in batches, each committed with the job's checkpoint: a worker
killed between two batches leaves the batches it committed, and the resumed attempt writes only the
rest. With no worker left to resume it, the job page tells how to finish it."""

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
BATCH = 200  # memconsole.memory.imports.writer.JOB_BATCH: episodes per committed transaction


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


def imported(database: Path) -> tuple[int, int]:
    """(episodes, distinct imported ids) of the import's bot: equal when none was written twice."""
    connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return connection.execute(
            "SELECT COUNT(*), COUNT(DISTINCT imported_episode_id) FROM memory_episode WHERE bot_uuid = 'crash-bot'"
        ).fetchone()
    finally:
        connection.close()


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


def make_site(tmp_path: Path, count: int) -> tuple[dict[str, str], Path, str]:
    """A migrated site with a queued import job of `count` episodes (ids e0, e1, ...)."""
    env = site_env(tmp_path)
    migrated = subprocess.run(
        [sys.executable, str(MANAGE), "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env, capture_output=True
    )
    assert migrated.returncode == 0, migrated.stderr
    upload = tmp_path / "memory.json"
    episodes = [{"id": f"e{i}", "content": f"fact {i} about topic {i % 40}", "status": "active"} for i in range(count)]
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


@pytest.fixture
def site(tmp_path: Path) -> tuple[dict[str, str], Path, str]:
    return make_site(tmp_path, EPISODES)


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
    assert row["episodes"] % BATCH == 0 and row["episodes"] < EPISODES, row  # whole committed batches only

    resumed = subprocess.run(
        [sys.executable, str(MANAGE), "resume_job", job_id], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "succeeded" in resumed.stdout and imported(database) == (EPISODES, EPISODES)
    assert "indexing: 1500/1500" in resumed.stderr  # progress on stderr (plain lines: not a terminal)


def test_it_resumes_an_import_killed_between_batches_and_writes_every_episode_once(tmp_path):
    count = 6 * BATCH
    env, database, job_id = make_site(tmp_path, count)
    log = tmp_path / "worker.log"
    first = start_worker(env, log)
    try:
        wait_for(database, job_id, lambda row: row["stage"] == "writing" and row["done"] >= BATCH)
    finally:
        kill_hard(first)
    killed = job_row(database, job_id)
    assert killed["status"] == "running" and 0 < killed["episodes"] < count, killed  # a partial import
    assert killed["episodes"] % BATCH == 0, killed  # of whole committed batches

    second = start_worker(env, log)
    try:
        finished = wait_for(database, job_id, lambda row: row["status"] in {"succeeded", "failed", "interrupted"})
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
    assert finished["status"] == "succeeded" and finished["attempts"] == 2, (finished, log.read_text()[-3000:])
    assert imported(database) == (count, count)  # every episode exactly once
    connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        (report_json,) = connection.execute(
            "SELECT report FROM memory_job WHERE id = ?", (job_id.replace("-", ""),)
        ).fetchone()
        audit_entries = connection.execute(
            "SELECT COUNT(*) FROM memory_auditentry WHERE operation = 'import' AND scope_key LIKE 'crash-bot:%'"
        ).fetchone()[0]
    finally:
        connection.close()
    report = json.loads(report_json)
    # The report counts the whole file, the batches of the killed attempt included, none as a conflict.
    assert (report["episodes"], report["conflict_count"], report["indexed"]) == (count, 0, count), report
    assert audit_entries == count // BATCH + 1  # one per committed batch, once each, and the summary
    check = subprocess.run(
        [sys.executable, str(MANAGE), "reindex", "--check"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
