"""kill -9 a process writing with the write-behind indexer (issue 22): every `remember` that
returned is in the database with its vector, recall finds the newest at once, and a restarted
process's indexer drains the backlog: nothing lost, nothing left, no drift, the chain verifies.

The writer (tests/memory/scripts/write_behind.py) runs with MEMCONSOLE_INDEXER=thread and a delay
far longer than the test, so the kill lands while its vectors are still pending (the case to prove).
File SQLite, then a PostgreSQL database of its own, with embedded Chroma."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chroma_server import server_mode
from tests.conftest import MODEL_DIR
from tests.processes import MANAGE, REPO, clean_env, own_postgres_database, run_script

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(server_mode(), reason="kills a process writing embedded Chroma's own folder"),
]

SCRIPT = Path(__file__).resolve().parent / "scripts" / "write_behind.py"
ACKED = 12
DATABASE_URL: dict[str, str] = {}  # the PostgreSQL run's own database


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request):
    if request.param == "sqlite":
        yield "sqlite"
        return
    with own_postgres_database("write_behind_crash", "the write-behind crash test on PostgreSQL") as url:
        DATABASE_URL["url"] = url
        try:
            yield url
        finally:
            DATABASE_URL.clear()


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = clean_env(
        DATABASE_URL=DATABASE_URL.get("url") or f"sqlite:///{tmp_path / 'memconsole.sqlite3'}",
        CHROMA_PATH=tmp_path / "chroma",
        MEMCONSOLE_MODEL_DIR=MODEL_DIR,
        MEMCONSOLE_VAR_DIR=tmp_path / "var",
        SECRET_KEY="write-behind-crash-test-secret-key-of-reasonable-length-0123",
        MEMCONSOLE_AUDIT_KEY="write-behind-crash-audit-key",
        MEMCONSOLE_INDEXER="thread",
        MEMCONSOLE_LOG_LEVEL="WARNING",
        **extra,
    )
    env["PYTHONPATH"] = str(REPO)
    return env


def _write_and_kill(env: dict[str, str]) -> list[str]:
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT)],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    acked: list[str] = []
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps({"role": "writer", "count": ACKED * 10}))
        process.stdin.close()
        for line in process.stdout:
            if line.startswith("ack "):
                acked.append(line.split()[1])
            if len(acked) >= ACKED:
                os.killpg(process.pid, signal.SIGKILL)  # mid-writes, vectors still pending
                break
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(120)
    assert process.returncode == -signal.SIGKILL
    return acked


def test_a_writer_killed_with_pending_vectors_loses_nothing_and_the_backlog_drains(tmp_path, database):
    migrated = subprocess.run(
        [sys.executable, str(MANAGE), "migrate", "--noinput", "-v", "0"],
        cwd=REPO,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert migrated.returncode == 0, migrated.stderr
    acked = _write_and_kill(_env(tmp_path, MEMCONSOLE_INDEX_DELAY_MS="600000"))
    assert len(acked) == ACKED

    restarted = run_script(SCRIPT, _env(tmp_path, MEMCONSOLE_INDEX_DELAY_MS="50"), {"role": "restart", "acked": acked})
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    state = json.loads(restarted.stdout.strip().splitlines()[-1])
    assert state["pending_at_start"] >= ACKED - 1, state  # the kill came before the indexer wrote them
    assert state["lost"] == [], state
    assert state["recalled_before_drain"], state
    assert (state["pending_after"], state["not_in_index"], state["drift"]) == (0, [], 0), state
    assert state["chain"], state
