"""kill -9 an erasure half way through its vector-index part, then finish it by running it again.

The installation (file SQLite, embedded Chroma) is filled by scripts/erasure_setup.py; the real
`manage.py erase_subject` runs in its own process group and the group gets SIGKILL when it prints
a chosen progress line. After the kill the health check must say ERROR with the command that
finishes it; after the second run no file under the installation (database, WAL, Chroma's SQLite
file and HNSW folders) holds the person's id or words, the exports and snapshots hold nothing of
them, and the chain verifies. (Embedded Chroma only: a Chroma server's files are on its host.)
"""

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
from tests.processes import MANAGE, REPO, clean_env, run_script

from .test_erasure import MARKERS, SUBJECT, _files_holding, _needles

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(server_mode(), reason="kills a process writing embedded Chroma's own folder"),
]

SCRIPTS = Path(__file__).resolve().parent / "scripts"
KILL_TIMEOUT = 120


def _env(tmp_path: Path) -> dict[str, str]:
    return clean_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'memconsole.sqlite3'}",
        CHROMA_PATH=tmp_path / "chroma",
        MEMCONSOLE_MODEL_DIR=MODEL_DIR,
        MEMCONSOLE_VAR_DIR=tmp_path / "var",
        MEMCONSOLE_SNAPSHOT_RETENTION_DAYS="0",
        SECRET_KEY="erasure-crash-test-secret-key-of-reasonable-length-0123456789",
    )


def _manage(env: dict[str, str], *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, str(MANAGE), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode in ok, result.stdout + result.stderr
    return result


def _erase_killed_at(env: dict[str, str], line: str) -> list[str]:
    """Run the erasure and SIGKILL its process group as soon as it prints `line`; its stderr lines."""
    process = subprocess.Popen(
        [sys.executable, str(MANAGE), "erase_subject", "--sender-id", SUBJECT],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    seen: list[str] = []
    try:
        assert process.stderr is not None
        for text in process.stderr:
            seen.append(text.rstrip("\n"))
            if text.startswith(line):
                os.killpg(process.pid, signal.SIGKILL)
                break
    finally:
        if process.poll() is None:  # the line never came: do not leave it running
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(KILL_TIMEOUT)
    assert process.returncode == -signal.SIGKILL, seen
    return seen


def _erasure_check(env: dict[str, str]) -> dict:
    result = _manage(env, "memory_health", "--json", "--no-store", ok=(0, 1, 2))
    return {c["id"]: c for c in json.loads(result.stdout)["checks"]}["erasure"]


def _occurrences(folder: Path, needles: list[bytes]) -> int:
    return sum(path.read_bytes().count(n) for path in folder.rglob("*") if path.is_file() for n in needles)


@pytest.mark.parametrize(
    ("kill_line", "finish"),
    [
        ("vector index: rebuilding collection 1 of 2", "reindex, then the same erasure again"),
        ("vector index: rebuilt collection 1 of 2", "erase_subject --resume"),
    ],
)
def test_it_finishes_an_erasure_killed_half_way_and_leaves_no_trace(tmp_path, kill_line, finish):
    env = _env(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    _manage(env, "migrate", "--verbosity", "0")
    setup = run_script(SCRIPTS / "erasure_setup.py", env, {"subject": SUBJECT, "markers": MARKERS})
    assert setup.returncode == 0, setup.stdout + setup.stderr
    needles = _needles()

    seen = _erase_killed_at(env, kill_line)

    assert any(text.startswith("database: done (receipt ") for text in seen), seen
    left_in_chroma = _occurrences(tmp_path / "chroma", needles)
    assert left_in_chroma > 0  # the kill left the person in the index: this is what must be finished
    check = _erasure_check(env)
    assert check["status"] == "ERROR" and "erase_subject --resume" in check["fix"], check

    if finish == "erase_subject --resume":
        resumed = _manage(env, "erase_subject", "--resume")
        assert "resumed 1 unfinished erasures, 1 finished" in resumed.stdout, resumed.stdout + resumed.stderr
    else:
        _manage(env, "reindex")  # what an operator may well do first: it must not make things worse
        again = _manage(env, "erase_subject", "--sender-id", SUBJECT)
        assert "(finished an interrupted erasure)" in again.stdout, again.stdout + again.stderr
        assert "compacted; database: compacted" in again.stderr, again.stderr

    checked = run_script(SCRIPTS / "erasure_check.py", env, {"out": str(out)})
    assert "CHAIN True" in checked.stdout, checked.stdout + checked.stderr
    assert _files_holding(tmp_path, needles) == {}
    group = json.loads((out / "group.json").read_text(encoding="utf-8"))
    assert group["episodes"]["count"] == 30 and group["profiles"]["count"] == 0
    receipts = [e for e in group["audit"]["entries"] if e["operation"] == "erase_subject"]
    assert receipts == []  # the receipt belongs to no scope
    state = run_script(SCRIPTS / "erasure_unfinished.py", env)
    assert json.loads(state.stdout) == {"unfinished": [], "check": "OK"}, state.stdout + state.stderr
