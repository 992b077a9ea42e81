"""/mcp served as in production: gunicorn's gthread workers (memconsole/gunicorn_config.py), driven by the
official MCP client, several calls at once, in both protocol eras. SQLite and the embedded index, so one worker."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests import processes
from tests.conftest import MODEL_DIR

from .conftest import MODES, data_of, error_of, mcp_client

pytestmark = pytest.mark.slow

_LISTENING = re.compile(r"Listening at: http://[^:]+:(\d+)")


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(processes.MANAGE), *args],
        cwd=processes.REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"manage.py {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def gunicorn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(url, token secret) of gunicorn serving a fresh SQLite installation with 4 threads."""
    root = tmp_path_factory.mktemp("mcp-gunicorn")
    env = processes.clean_env(
        DATABASE_URL=f"sqlite:///{root / 'db.sqlite3'}",
        CHROMA_PATH=root / "chroma",
        MEMCONSOLE_MODEL_DIR=MODEL_DIR,
        MEMCONSOLE_VAR_DIR=root / "var",
        SECRET_KEY="mcp-gunicorn-" + "s" * 40,
        MEMCONSOLE_API_RATE_PER_MINUTE=1_000_000,
        WEB_CONCURRENCY=1,
        GUNICORN_THREADS=4,
    )
    _manage(env, "migrate", "--noinput", "-v", "0")
    secret = _manage(env, "create_bot_token", "mcp gunicorn", "--bot", "bot-a").strip().splitlines()[-1]
    log_path = root / "gunicorn.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                str(processes.GUNICORN),
                "memconsole.wsgi",
                "--config",
                "python:memconsole.gunicorn_config",
                "--bind",
                f"{processes.LOOPBACK}:0",
            ],
            cwd=processes.REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        yield _wait_until_ready(process, log_path), secret
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_ready(process: subprocess.Popen, log_path: Path, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"gunicorn exited {process.returncode}:\n{log_path.read_text()[-4000:]}"
        port = _LISTENING.search(log_path.read_text(errors="replace"))
        if port:
            url = f"http://{processes.LOOPBACK}:{port[1]}"
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
                    if response.status == 200:
                        return url
            except (urllib.error.URLError, OSError):
                pass
        time.sleep(0.2)
    pytest.fail(f"gunicorn was not ready within {timeout} s:\n{log_path.read_text()[-4000:]}")


@pytest.mark.parametrize("mode", MODES)
def test_it_serves_mcp_from_gunicorn_gthread_workers_concurrently(gunicorn, mode):
    url, secret = gunicorn
    scope = {"bot_uuid": "bot-a", "session_name": f"gunicorn_{mode}"}

    async def main() -> tuple[list[dict], dict, dict]:
        async with mcp_client(url, secret, mode) as client:
            assert len((await client.list_tools()).tools) == 12  # 7, plus issue 20's facts and window
            stored: list[dict] = []

            async def remember(number: int) -> None:
                result = await client.call_tool("remember", {**scope, "content": f"Fact number {number} is true"})
                stored.append(data_of(result))

            async with anyio.create_task_group() as group:  # 8 calls in flight on 4 threads
                for number in range(8):
                    group.start_soon(remember, number)
            recalled = data_of(await client.call_tool("recall", {**scope, "query": "fact number 3", "top_k": 8}))
            refused = error_of(await client.call_tool("recall", {**scope, "bot_uuid": "bot-b", "query": "x"}))
            return stored, recalled, refused

    stored, recalled, refused = anyio.run(main)
    assert len({result["episode_id"] for result in stored}) == 8
    assert len(recalled["episodes"]) == 8 and recalled["episodes"][0]["content"] == "Fact number 3 is true"
    assert refused["code"] == "forbidden"
