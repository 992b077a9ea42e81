"""What the tests that run memconsole in subprocesses share (tests/deploy, tests/reliability, ...):
where things are, a clean environment for a child process, a runner for the tests' scripts, and a
PostgreSQL database of their own."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

REPO = Path(__file__).resolve().parents[1]
MANAGE = REPO / "manage.py"
GUNICORN = Path(sys.executable).with_name("gunicorn")
LOOPBACK = "127.0.0.1"
# A PostgreSQL superuser URL; the tests create (and drop) their own databases on that server.
POSTGRES_ADMIN_URL = os.environ.get("MEMCONSOLE_TEST_POSTGRES_URL") or "postgres://postgres@127.0.0.1:5432/postgres"

# Settings of the outer environment that must not leak into the subprocesses.
_CLEARED_PREFIXES = ("MEMCONSOLE_", "CHROMA_", "GUNICORN_", "DJANGO_")
_CLEARED_NAMES = {"DATABASE_URL", "SECRET_KEY", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "DEBUG", "WEB_CONCURRENCY"}


def in_ci() -> bool:
    return (os.environ.get("CI") or "").strip().lower() not in {"", "0", "false", "no"}


def clean_env(**settings: Any) -> dict[str, str]:
    """The parent's environment without any memconsole setting (nor a *_FILE one), plus `settings`."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(_CLEARED_PREFIXES) and name not in _CLEARED_NAMES and not name.endswith("_FILE")
    }
    env.update(PYTHONUNBUFFERED="1", ANONYMIZED_TELEMETRY="False")
    env.update({name: str(value) for name, value in settings.items()})
    return env


def run_script(
    script: Path, env: dict[str, str], payload: Any = None, *, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run one of the tests' scripts (real modules under tests/*/scripts/) in a fresh Python from the
    repository's root, with `env` and `payload` as JSON on stdin; output captured as text."""
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=REPO,
        env=env,
        input=json.dumps(payload if payload is not None else {}),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def own_postgres_database(prefix: str, needed_for: str) -> Iterator[str]:
    """The URL of a new PostgreSQL database `<prefix>_<pid>_<random>`, dropped afterwards.

    Skips when PostgreSQL is unreachable, except in CI (CI set), where that is a failure.
    """
    try:
        admin = psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3, autocommit=True)
    except psycopg.OperationalError as exc:
        reason = f"PostgreSQL is unreachable at {POSTGRES_ADMIN_URL} ({str(exc).strip()})"
        if in_ci():
            pytest.fail(f"{reason}; CI is set, so {needed_for} must run", pytrace=False)
        pytest.skip(f"{reason}; set MEMCONSOLE_TEST_POSTGRES_URL, or CI=1 to make this a failure")
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield urlunsplit(urlsplit(POSTGRES_ADMIN_URL)._replace(path=f"/{name}"))
        finally:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
