"""Embedded Chroma keeps at most a fifth of the soft open-file limit of indexes in memory, and an
index it evicts before writing it to disk cannot be opened again ("Nothing found on disk"). A
process started with a low soft limit (systemd's 1,024 is common) must still answer every space:
`lib/chromacache` raises the soft limit to the hard one before building the client."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from memconsole.lib import chromacache
from tests.chroma_server import server_mode

pytestmark = pytest.mark.skipif(server_mode(), reason="the embedded index's cache; a server has its own")

SCRIPT = Path(__file__).parent / "scripts" / "many_spaces.py"
SOFT = 250  # Chroma would keep 50 indexes open
SPACES = 70


def _run(role: str, chroma: Path) -> dict:
    def low_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    env = {**os.environ, "CHROMA_PATH": str(chroma), "CHROMA_HOST": ""}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), role, str(SPACES)],
        env=env,
        preexec_fn=low_soft_limit,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]


@pytest.mark.skipif(HARD != resource.RLIM_INFINITY and HARD < 5 * 1000, reason="the hard open-file limit is too low")
def test_a_process_started_with_a_low_open_file_limit_answers_every_space(tmp_path):
    _run("write", tmp_path / "chroma")
    searched = _run("search", tmp_path / "chroma")  # without the raise: cache 50, the evicted spaces fail
    assert searched["cache"] >= 1000 and searched["failed"] == []


def test_it_raises_the_soft_limit_to_the_hard_one():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT, hard))
        now = chromacache.raise_open_file_limit()
        expected = (
            chromacache.MAX_OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, chromacache.MAX_OPEN_FILES)
        )
        assert now == expected == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
