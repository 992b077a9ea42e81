"""A real Chroma server for tests: `chroma run` (the CLI shipped with the chromadb package).

`chroma_server` is a session-scoped fixture yielding `(host, port)` of a server started on a free
loopback port with a temporary data folder; it is stopped at the end of the session. Test modules
that need it import it (`from tests.chroma_server import chroma_server`); tests/conftest.py
imports it so that MEMCONSOLE_TEST_CHROMA=server runs the whole suite against it (see there).

This is a plain module, not a conftest, so that nothing starts a server unless a test asks.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from memconsole.lib import vectors

HOST = "127.0.0.1"
START_TIMEOUT_SECONDS = 60.0
# MEMCONSOLE_TEST_CHROMA=server: run the tests against a Chroma server instead of embedded folders.
MODE_VARIABLE = "MEMCONSOLE_TEST_CHROMA"


def server_mode() -> bool:
    """True when the suite runs against a Chroma server (MEMCONSOLE_TEST_CHROMA=server)."""
    mode = (os.environ.get(MODE_VARIABLE) or "embedded").strip().lower()
    if mode not in {"embedded", "server"}:
        raise pytest.UsageError(f"{MODE_VARIABLE}={mode!r}: use 'embedded' (default) or 'server'")
    return mode == "server"


def chroma_executable() -> str:
    """The `chroma` CLI of the running interpreter's environment (the venv's), else from PATH."""
    beside = Path(sys.executable).with_name("chroma")
    if beside.exists():
        return str(beside)
    found = shutil.which("chroma")
    if not found:
        raise RuntimeError("the `chroma` CLI is not installed (it ships with the chromadb package)")
    return found


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class ChromaServer:
    host: str
    port: int
    path: Path
    log_path: Path
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def heartbeat(self, timeout: float = 2.0) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=timeout) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextmanager
def running_chroma_server(path: Path, host: str = HOST, attempts: int = 3) -> Iterator[ChromaServer]:
    """Start `chroma run` on a free port with its data in `path`; wait for its heartbeat; stop it
    on exit. Retries on another port if the first one was taken in between."""
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "NO_COLOR": "1"}
    failure = ""
    for attempt in range(attempts):
        port = free_port(host)
        log_path = path.parent / f"{path.name}-chroma-{port}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [chroma_executable(), "run", "--path", str(path), "--host", host, "--port", str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        server = ChromaServer(host, port, path, log_path, process)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline and process.poll() is None and not server.heartbeat():
            time.sleep(0.1)
        if process.poll() is None and server.heartbeat():
            try:
                yield server
            finally:
                _stop(process)
            return
        _stop(process)
        failure = f"attempt {attempt + 1}: exit code {process.returncode}\n{server.log_tail()}"
    raise RuntimeError(f"the Chroma server did not start ({failure})")


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """(host, port) of a Chroma server shared by the whole test session."""
    with running_chroma_server(tmp_path_factory.mktemp("chroma-server") / "data") as server:
        yield server.host, server.port


def reset_server_collections(host: str, port: int) -> int:
    """Delete every memconsole collection on the Chroma server at host:port; returns how many.

    Collections are named from user_keys, which repeat from test to test (bot-a/group_100...), so
    a server shared by the session must be emptied after each test to keep tests independent.
    Uses its own client, so it works whatever a test did to the settings or the shared client.
    """

    client = chromadb.HttpClient(host=host, port=port, settings=ChromaSettings(anonymized_telemetry=False))
    dropped = 0
    for collection in client.list_collections():
        if not collection.name.startswith(vectors.COLLECTION_PREFIX):
            continue
        try:
            client.delete_collection(collection.name)
            dropped += 1
        except Exception as exc:  # already gone (a test dropped it) is fine; anything else is not
            if type(exc).__name__ != "NotFoundError":
                raise
    return dropped
