"""Fixtures and helpers for the production-path tests: real gunicorn, PostgreSQL, a Chroma server.

These tests run memconsole as an operator would, in subprocesses (`manage.py`, `gunicorn`), so
they use their own PostgreSQL database (created and dropped here), never pytest-django's.
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests import processes
from tests.conftest import MODEL_DIR
from tests.processes import GUNICORN, LOOPBACK, MANAGE, REPO, own_postgres_database

from .container_files import load_compose, parse_dockerfile


def clean_env(tmp_path: Path, **settings: Any) -> dict[str, str]:
    """The parent's environment without memconsole settings, plus a private var/ and `settings`."""
    return processes.clean_env(MEMCONSOLE_VAR_DIR=tmp_path / "var", MEMCONSOLE_MODEL_DIR=MODEL_DIR, **settings)


def manage(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run `manage.py args` like an operator; fail the test with its output when it fails."""
    result = subprocess.run(
        [sys.executable, str(MANAGE), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        pytest.fail(f"manage.py {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def script_json(env: dict[str, str], name: str, payload: Any, timeout: float = 180) -> Any:
    """Run scripts/<name> with `payload` (JSON on stdin) and return the JSON of its last stdout line."""
    result = processes.run_script(Path(__file__).resolve().parent / "scripts" / name, env, payload, timeout=timeout)
    if result.returncode != 0:
        pytest.fail(f"{name} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of a fresh PostgreSQL database of our own, dropped afterwards."""
    with own_postgres_database("memconsole_deploy", "the production-path tests") as url:
        yield url


# --- gunicorn -----------------------------------------------------------------------------------

ACCESS_LOG_FORMAT = "access %(p)s %(m)s %(U)s %(s)s"
_ACCESS_LINE = re.compile(r"^access <(\d+)> (\S+) (\S+) (\d{3})$")
_BOOTED = re.compile(r"Booting worker with pid: (\d+)")
_LISTENING = re.compile(r"Listening at: http://[^:]+:(\d+)")


@dataclass
class Gunicorn:
    """A gunicorn master started with memconsole's config; its log is a file."""

    process: subprocess.Popen
    log_path: Path
    port: int = 0

    @classmethod
    def start(cls, env: dict[str, str], log_path: Path, *args: str) -> Gunicorn:
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [
                    str(GUNICORN),
                    "memconsole.wsgi",
                    "--config",
                    "python:memconsole.gunicorn_config",
                    "--bind",
                    f"{LOOPBACK}:0",
                    "--access-logformat",
                    ACCESS_LOG_FORMAT,
                    *args,
                ],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return cls(process, log_path)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def worker_pids(self) -> list[int]:
        return [int(pid) for pid in _BOOTED.findall(self.log())]

    def served_by(self, method: str, path_prefix: str, status: int | None = None) -> set[int]:
        """Pids of the workers that answered `method path_prefix*` (with `status`), from the access log."""
        pids = set()
        for line in self.log().splitlines():
            match = _ACCESS_LINE.match(line.strip())
            if (
                match
                and match[2] == method
                and match[3].startswith(path_prefix)
                and (status is None or int(match[4]) == status)
            ):
                pids.add(int(match[1]))
        return pids

    def wait_ready(self, workers: int, host: str = LOOPBACK, timeout: float = 120) -> None:
        """Wait for the port, `workers` booted workers and a 200 from /readyz."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"gunicorn exited {self.process.returncode}:\n{self.log()[-4000:]}")
            if not self.port:
                found = _LISTENING.search(self.log())
                self.port = int(found[1]) if found else 0
            if self.port and len(self.worker_pids()) >= workers:
                try:
                    if Client(self.port, host).get("/readyz").status == 200:
                        return
                except OSError:
                    pass
            time.sleep(0.2)
        pytest.fail(f"gunicorn was not ready within {timeout:.0f} s:\n{self.log()[-4000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # quick shutdown: the tests are done with it
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


# --- HTTP ---------------------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


@dataclass
class Client:
    """A small HTTP client behind a pretend TLS proxy (X-Forwarded-Proto: https) with a cookie jar.

    One connection per request, so that requests spread over gunicorn's workers. Cookies are kept
    by hand because the server marks them Secure, which cookie jars never send over plain http.
    """

    port: int
    host: str = LOOPBACK
    cookies: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def origin(self) -> str:
        return f"https://{self.host}:{self.port}"

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> Response:
        with self._lock:
            cookie = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        all_headers = {"Host": f"{self.host}:{self.port}", "X-Forwarded-Proto": "https", **(headers or {})}
        if cookie:
            all_headers["Cookie"] = cookie
        connection = http.client.HTTPConnection(LOOPBACK, self.port, timeout=60)
        try:
            connection.request(method, path, body=body, headers=all_headers)
            raw = connection.getresponse()
            response = Response(raw.status, raw.msg, raw.read())
        finally:
            connection.close()
        jar = SimpleCookie()
        for header in response.headers.get_all("Set-Cookie") or []:
            jar.load(header)
        with self._lock:
            for name, morsel in jar.items():
                if morsel["max-age"] == "0" or morsel.value == "":
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = morsel.value
        return response

    def get(self, path: str) -> Response:
        return self.request("GET", path)

    def post_form(self, path: str, data: dict[str, str]) -> Response:
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": self.origin,
            "Referer": f"{self.origin}{path}",
        }
        return self.request("POST", path, urlencode(data).encode(), headers)

    def post_json(self, path: str, data: Any, token: str) -> Response:
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        return self.request("POST", path, json.dumps(data).encode(), headers)

    def login(self, username: str, password: str) -> Response:
        page = self.get("/accounts/login/")
        assert page.status == 200, f"login page: {page.status} {page.text[:500]}"
        assert "csrftoken" in self.cookies, "the login page set no CSRF cookie"
        return self.post_form(
            "/accounts/login/",
            {"username": username, "password": password, "csrfmiddlewaretoken": self.cookies["csrftoken"], "next": "/"},
        )


# --- container files ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def dockerfile():
    return parse_dockerfile(REPO / "Dockerfile")


@pytest.fixture(scope="session")
def compose() -> dict[str, Any]:
    return load_compose(REPO / "docker-compose.yml")
