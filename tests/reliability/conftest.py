"""Fixtures and helpers for the reliability suite (issue 8).

The crash, concurrency and load tests run memconsole the way an operator does: `manage.py`
commands, small driver scripts (tests/reliability/scripts/) and gunicorn, each a real subprocess
against a file SQLite database (or a PostgreSQL database of our own) and a Chroma folder (or a
Chroma server) under the test's tmp folder. Subprocesses are killed with SIGKILL (their whole
process group), then a fresh process ("the restart") checks what they left behind.

Every test also records its figures (kill points, writers, inputs, cells) with `record_figure`;
they are printed at the end of the run and, when MEMCONSOLE_RELIABILITY_FIGURES names a file,
written there as JSON (docs/reliability.md is written from such a run).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import processes
from tests.chroma_server import free_port
from tests.conftest import MODEL_DIR
from tests.processes import GUNICORN, LOOPBACK, MANAGE, REPO, own_postgres_database

SCRIPTS = Path(__file__).resolve().parent / "scripts"
PYTHON = sys.executable
BOT = "crash-bot"


# --- figures ------------------------------------------------------------------------------------

FIGURES: dict[str, Any] = {}
_figures_lock = threading.Lock()


def record_figure(section: str, name: str, value: Any) -> None:
    """Keep one figure of this run (`section.name = value`; lists are extended, numbers added)."""
    with _figures_lock:
        bucket = FIGURES.setdefault(section, {})
        if isinstance(value, list):
            bucket.setdefault(name, []).extend(value)
        elif (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and isinstance(bucket.get(name), (int, float))
        ):
            bucket[name] += value
        else:
            bucket[name] = value


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section("reliability figures")
    for section, values in sorted(FIGURES.items()):
        for name, value in sorted(values.items()):
            shown = len(value) if isinstance(value, list) else value
            terminalreporter.write_line(f"{section}.{name}: {shown}")
    target = os.environ.get("MEMCONSOLE_RELIABILITY_FIGURES")
    if target:
        Path(target).write_text(json.dumps(FIGURES, indent=2, sort_keys=True, default=str))
        terminalreporter.write_line(f"written to {target}")


# --- subprocess environment ---------------------------------------------------------------------


def clean_env(**settings: Any) -> dict[str, str]:
    """The parent's environment without memconsole settings, plus `settings`; driver scripts
    import memconsole from the checkout."""
    env = processes.clean_env(DJANGO_SETTINGS_MODULE="memconsole.settings")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update({name: str(value) for name, value in settings.items()})
    return env


@dataclass
class Site:
    """One installation in a folder: SQLite file, embedded Chroma folder, var/, and its environment."""

    root: Path
    env: dict[str, str]

    @classmethod
    def create(cls, root: Path, **settings: Any) -> Site:
        root.mkdir(parents=True, exist_ok=True)
        defaults: dict[str, Any] = {
            "DATABASE_URL": f"sqlite:///{root / 'db.sqlite3'}",  # an absolute path: sqlite:////abs/path
            "CHROMA_PATH": root / "chroma",
            "MEMCONSOLE_MODEL_DIR": MODEL_DIR,
            "MEMCONSOLE_VAR_DIR": root / "var",
            "SECRET_KEY": "reliability-" + "s" * 40,
            "MEMCONSOLE_AUDIT_KEY": "reliability-audit-key",
            "MEMCONSOLE_API_RATE_PER_MINUTE": 1_000_000,
            "MEMCONSOLE_LOG_LEVEL": "WARNING",
        }
        env = clean_env(**{**defaults, **settings})
        return cls(root, env)

    @property
    def database(self) -> Path:
        return self.root / "db.sqlite3"

    def copy_to(self, root: Path, **settings: Any) -> Site:
        """A copy of this (stopped) installation's database and index in `root`, same settings."""
        root.mkdir(parents=True, exist_ok=True)
        for name in ("db.sqlite3", "db.sqlite3-wal", "db.sqlite3-shm"):
            if (self.root / name).exists():
                shutil.copy2(self.root / name, root / name)
        if (self.root / "chroma").exists():
            shutil.copytree(self.root / "chroma", root / "chroma")
        env = {**self.env, **{k: str(v) for k, v in settings.items()}}
        for name in ("DATABASE_URL", "CHROMA_PATH", "MEMCONSOLE_VAR_DIR"):
            env[name] = env[name].replace(str(self.root), str(root))
        return Site(root, env)

    def manage(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [PYTHON, str(MANAGE), *args], cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and result.returncode != 0:
            pytest.fail(f"manage.py {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        return result

    def script(self, name: str, payload: Any = None, timeout: float = 300) -> Any:
        """Run scripts/<name> with `payload` (JSON on stdin); return the JSON of its last stdout line."""
        result = processes.run_script(SCRIPTS / name, self.env, payload, timeout=timeout)
        if result.returncode != 0:
            pytest.fail(f"{name} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
        return json.loads(result.stdout.strip().splitlines()[-1])

    def check(self, **payload: Any) -> dict[str, Any]:
        """The restart: a fresh process runs `payload['recover']` commands, then inspects everything."""
        return self.script("check_site.py", payload)


# --- killing ------------------------------------------------------------------------------------


@dataclass
class Victim:
    """A subprocess in its own process group whose output is watched, to be killed at a chosen point."""

    process: subprocess.Popen
    started: float
    output: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _readers: list[threading.Thread] = field(default_factory=list)

    @classmethod
    def start(cls, args: list[str], env: dict[str, str], stdin: str | None = None) -> Victim:
        process = subprocess.Popen(
            args,
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: SIGKILL reaches every process it started
        )
        victim = cls(process, time.monotonic())
        for stream in (process.stdout, process.stderr):
            reader = threading.Thread(target=victim._read, args=(stream,), daemon=True)
            reader.start()
            victim._readers.append(reader)
        if stdin is not None:
            assert process.stdin is not None
            process.stdin.write(stdin.encode())
            process.stdin.close()
        return victim

    def _read(self, stream: Any) -> None:
        while True:
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                return
            with self._lock:
                self.output.append(chunk.decode("utf-8", "replace"))

    def text(self) -> str:
        with self._lock:
            return "".join(self.output)

    def wait_for(self, condition: Callable[[str], bool], timeout: float = 120) -> bool:
        """Wait until `condition(output so far)` holds; False if the process ended first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition(self.text()):
                return True
            if self.process.poll() is not None:
                time.sleep(0.05)  # let the readers drain
                return condition(self.text())
            time.sleep(0.005)
        pytest.fail(f"the condition was not reached within {timeout} s; output:\n{self.text()[-3000:]}")

    def kill(self) -> bool:
        """SIGKILL the whole group. True when the process was still running (a real kill)."""
        alive = self.process.poll() is None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        for reader in self._readers:
            reader.join(timeout=5)
        return alive and self.process.returncode == -signal.SIGKILL


# --- gunicorn -----------------------------------------------------------------------------------


@dataclass
class Server:
    """gunicorn serving memconsole on a free loopback port, killable as a whole process group."""

    victim: Victim
    port: int

    @classmethod
    def start(cls, env: dict[str, str], *args: str, timeout: float = 120) -> Server:
        port = free_port()
        victim = Victim.start(
            [
                str(GUNICORN),
                "memconsole.wsgi",
                "-c",
                "python:memconsole.gunicorn_config",
                "-b",
                f"{LOOPBACK}:{port}",
                *args,
            ],
            {"WEB_CONCURRENCY": "1", **env},
        )
        server = cls(victim, port)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if victim.process.poll() is not None:
                pytest.fail(f"gunicorn exited {victim.process.returncode}:\n{victim.text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{server.url}/readyz", timeout=5) as response:
                    if response.status == 200:
                        return server
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        server.kill()
        pytest.fail(f"gunicorn was not ready within {timeout} s:\n{victim.text()[-4000:]}")

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def kill(self) -> bool:
        return self.victim.kill()


def post_json(url: str, body: Any, token: str | None = None, timeout: float = 30) -> tuple[int, Any]:
    """POST JSON; (status, decoded body). Connection errors raise OSError (URLError is one)."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            return error.code, json.loads(raw)
        except ValueError:
            return error.code, raw.decode("utf-8", "replace")


# --- a migrated installation to copy ------------------------------------------------------------

TOKEN_SCRIPT = "create_tokens.py"


@pytest.fixture(scope="session")
def template_site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """A migrated SQLite installation with bot tokens, to be copied by each crash scenario.

    `site.tokens` maps bot_uuid to a token secret (made by `manage.py create_bot_token`).
    """
    site = Site.create(tmp_path_factory.mktemp("template") / "site")
    site.manage("migrate", "--noinput", "-v", "0")
    tokens = {}
    for bot in (BOT, "other-bot"):
        tokens[bot] = site.manage("create_bot_token", f"{bot} token", "--bot", bot).stdout.strip()
    site.tokens = tokens  # type: ignore[attr-defined]
    return site


# --- PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def reliability_postgres_url() -> Iterator[str]:
    """A PostgreSQL database of our own (memconsole_reliability_<pid>_<random>), dropped afterwards."""
    with own_postgres_database("memconsole_reliability", "the PostgreSQL concurrency test") as url:
        yield url
