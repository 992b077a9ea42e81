"""Settings from the environment: typed helpers fail clearly, production needs SECRET_KEY, local runs need nothing."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from memconsole import settings as project_settings

REPO = Path(__file__).resolve().parents[2]
SETTINGS_FILE = REPO / "memconsole" / "settings.py"
ENV_NAMES = [
    "MEMCONSOLE_ENV",
    "SECRET_KEY",
    "SECRET_KEY_FILE",
    "DEBUG",
    "DATABASE_URL",
    "ALLOWED_HOSTS",
    "MEMCONSOLE_FERNET_KEYS",
    "MEMCONSOLE_FERNET_KEYS_FILE",
    "MEMCONSOLE_RECENCY_HALF_LIFE_DAYS",
    "MEMCONSOLE_SNAPSHOT_RETENTION_DAYS",
    "MEMCONSOLE_MAX_CONTENT_CHARS",
    "CHROMA_HOST",
    "CHROMA_PORT",
    "CHROMA_PATH",
    "MEMCONSOLE_MODEL_DIR",
    "MEMCONSOLE_AUDIT_KEY",
]


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMCONSOLE_VAR_DIR", str(tmp_path / "var"))
    return monkeypatch


def _load(**env: str) -> dict:
    """Execute settings.py afresh (not the running project's settings) with extra environment."""
    old = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        return runpy.run_path(str(SETTINGS_FILE))
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# --- helpers ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        (" on ", True),
        ("0", False),
        ("False", False),
        ("no", False),
        ("off", False),
    ],
)
def test_it_reads_booleans(clean_env, raw, expected):
    clean_env.setenv("SOME_FLAG", raw)
    assert project_settings.envbool("SOME_FLAG", not expected) is expected


def test_it_uses_the_default_for_an_unset_or_empty_boolean(clean_env):
    assert project_settings.envbool("SOME_FLAG", True) is True
    clean_env.setenv("SOME_FLAG", "")
    assert project_settings.envbool("SOME_FLAG", False) is False


@pytest.mark.parametrize("raw", ["maybe", "2", "tru", "y e s"])
def test_it_refuses_a_bad_boolean_naming_the_variable(clean_env, raw):
    clean_env.setenv("SOME_FLAG", raw)
    with pytest.raises(ImproperlyConfigured, match=r"SOME_FLAG=.* is not a boolean"):
        project_settings.envbool("SOME_FLAG", False)


def test_it_reads_whole_numbers(clean_env):
    clean_env.setenv("SOME_NUMBER", "42")
    assert project_settings.envint("SOME_NUMBER", 1) == 42
    clean_env.setenv("SOME_NUMBER", "")
    assert project_settings.envint("SOME_NUMBER", 7) == 7


@pytest.mark.parametrize("raw", ["ten", "1.5", "0x10", " "])
def test_it_refuses_a_bad_whole_number_naming_the_variable(clean_env, raw):
    clean_env.setenv("SOME_NUMBER", raw)
    with pytest.raises(ImproperlyConfigured, match=r"SOME_NUMBER=.* is not a whole number"):
        project_settings.envint("SOME_NUMBER", 1)


def test_it_refuses_a_number_below_its_minimum(clean_env):
    clean_env.setenv("SOME_NUMBER", "0")
    with pytest.raises(ImproperlyConfigured, match=r"SOME_NUMBER='0' must be at least 1"):
        project_settings.envint("SOME_NUMBER", 5, minimum=1)


def test_it_reads_a_secret_from_a_file(clean_env, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("from-a-file\n")
    clean_env.setenv("SOME_SECRET", "from-the-environment")
    clean_env.setenv("SOME_SECRET_FILE", str(secret))
    assert project_settings.env("SOME_SECRET") == "from-a-file"
    clean_env.setenv("SOME_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="SOME_SECRET_FILE"):
        project_settings.env("SOME_SECRET")


def test_it_reads_lists(clean_env):
    clean_env.setenv("SOME_LIST", " a, b ,,c ")
    assert project_settings.envlist("SOME_LIST") == ["a", "b", "c"]
    assert project_settings.envlist("UNSET_LIST") == []


# --- the settings module as a whole -----------------------------------------------------------------------


def test_it_runs_locally_with_no_configuration(clean_env, tmp_path):
    loaded = _load()
    assert loaded["DEBUG"] is False
    assert loaded["PRODUCTION"] is False
    assert loaded["DATABASES"]["default"]["ENGINE"] == "django.db.backends.sqlite3"
    options = loaded["DATABASES"]["default"]["OPTIONS"]
    assert options["transaction_mode"] == "IMMEDIATE" and "journal_mode=WAL" in options["init_command"]
    assert loaded["CHROMA_PATH"] == tmp_path / "var" / "chroma"
    assert loaded["MEMCONSOLE_FERNET_KEYS"] == []
    assert loaded["MEMCONSOLE_RECENCY_HALF_LIFE_DAYS"] == 30
    assert loaded["MEMCONSOLE_MAX_CONTENT_CHARS"] == 8000
    # a secret key is generated once into var/ and kept
    key_file = tmp_path / "var" / "secret_key"
    assert key_file.read_text().strip() == loaded["SECRET_KEY"] and len(loaded["SECRET_KEY"]) >= 50
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert _load()["SECRET_KEY"] == loaded["SECRET_KEY"]


@pytest.mark.parametrize("raw", ["garbage", "{good},not-a-key", "{good},YWJj"])
def test_it_refuses_a_fernet_key_that_is_none_without_naming_it(clean_env, raw):
    """Before, a garbage key started the server; every command then failed with a traceback."""
    good = Fernet.generate_key().decode()
    with pytest.raises(ImproperlyConfigured, match=r"MEMCONSOLE_FERNET_KEYS: key \d is not a Fernet key") as refused:
        _load(MEMCONSOLE_FERNET_KEYS=raw.format(good=good))
    assert "garbage" not in str(refused.value) and "not-a-key" not in str(refused.value)  # a secret stays unsaid
    assert (
        _load(MEMCONSOLE_FERNET_KEYS=f"{good}, {Fernet.generate_key().decode()}")["MEMCONSOLE_FERNET_KEYS"][0] == good
    )


def test_it_reads_the_memconsole_settings(clean_env):
    new_key, old_key = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    loaded = _load(
        MEMCONSOLE_FERNET_KEYS=f"{new_key}, {old_key}",
        MEMCONSOLE_RECENCY_HALF_LIFE_DAYS="7",
        MEMCONSOLE_SNAPSHOT_RETENTION_DAYS="0",
        MEMCONSOLE_MAX_CONTENT_CHARS="500",
        DATABASE_URL="postgres://memconsole@db.example:5432/memory",
        CHROMA_HOST="chroma.internal",
        CHROMA_PORT="8123",
        DEBUG="true",
    )
    assert loaded["MEMCONSOLE_FERNET_KEYS"] == [new_key, old_key]  # newest first
    assert (loaded["MEMCONSOLE_RECENCY_HALF_LIFE_DAYS"], loaded["MEMCONSOLE_SNAPSHOT_RETENTION_DAYS"]) == (7, 0)
    assert loaded["MEMCONSOLE_MAX_CONTENT_CHARS"] == 500
    assert loaded["DATABASES"]["default"]["ENGINE"] == "django.db.backends.postgresql"
    assert loaded["DATABASES"]["default"]["NAME"] == "memory"
    assert (loaded["CHROMA_HOST"], loaded["CHROMA_PORT"]) == ("chroma.internal", 8123)
    assert loaded["DEBUG"] is True


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "sometimes"}, "DEBUG='sometimes' is not a boolean"),
        ({"MEMCONSOLE_RECENCY_HALF_LIFE_DAYS": "0"}, "MEMCONSOLE_RECENCY_HALF_LIFE_DAYS='0' must be at least 1"),
        ({"MEMCONSOLE_MAX_CONTENT_CHARS": "lots"}, "MEMCONSOLE_MAX_CONTENT_CHARS='lots' is not a whole number"),
        ({"CHROMA_PORT": "-1"}, "CHROMA_PORT='-1' must be at least 1"),
        ({"MEMCONSOLE_ENV": "staging"}, "MEMCONSOLE_ENV='staging' must be 'local' or 'production'"),
        ({"DATABASE_URL": "nonsense://x"}, "DATABASE_URL"),
    ],
)
def test_it_refuses_bad_values_clearly(clean_env, env, message):
    with pytest.raises(ImproperlyConfigured) as caught:
        _load(**env)
    assert message in str(caught.value)


def test_it_requires_a_secret_key_in_production(clean_env):
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY is required when MEMCONSOLE_ENV=production"):
        _load(MEMCONSOLE_ENV="production")
    loaded = _load(MEMCONSOLE_ENV="production", SECRET_KEY="s" * 60)
    assert loaded["SECRET_KEY"] == "s" * 60
    assert loaded["SESSION_COOKIE_SECURE"] and loaded["CSRF_COOKIE_SECURE"] and loaded["SECURE_SSL_REDIRECT"]
    assert loaded["ALLOWED_HOSTS"] == []


def test_it_refuses_to_start_in_production_without_a_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    env.update(
        MEMCONSOLE_ENV="production", MEMCONSOLE_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="memconsole.settings"
    )
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is required when MEMCONSOLE_ENV=production" in started.stderr
    assert not (tmp_path / "secret_key").exists()
