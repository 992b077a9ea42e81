"""`manage.py memory_health` as cron and monitoring run it: exit 0 OK, 1 WARN, 2 ERROR, and the JSON
result printed whatever is down (found by an operator: with the database unreachable it printed a
traceback and exited 1, WARN's code; with the encryption key missing Django's own system check
stopped it, exit 1 and no JSON)."""

from __future__ import annotations

import json
import subprocess
import sys

from cryptography.fernet import Fernet

from tests.processes import MANAGE, POSTGRES_ADMIN_URL, REPO, clean_env


def test_an_unreachable_database_is_an_error_with_its_json(tmp_path):
    missing = POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + "/memconsole_no_such_database"
    env = clean_env(DATABASE_URL=missing, MEMCONSOLE_VAR_DIR=tmp_path)

    done = subprocess.run(
        [sys.executable, str(MANAGE), "memory_health", "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 2, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["status"] == "ERROR"
    checks = {check["id"]: check for check in result["checks"]}
    assert checks["database"]["status"] == "ERROR" and "memconsole_no_such_database" in checks["database"]["detail"]
    assert checks["write"]["status"] == "ERROR"  # the probe could not run, and says so


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(MANAGE), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


WRITE_ONE = """
from memconsole.memory import episodes
from memconsole.memory.audit import Actor
from memconsole.memory.scopes import derive_scope
episodes.remember(derive_scope("health-bot", "group_1"), Actor.system("test"), "a sealed memory", sender_id="u1")
"""


def test_a_missing_encryption_key_is_an_error_with_its_json(tmp_path):
    keyed = clean_env(MEMCONSOLE_VAR_DIR=tmp_path, MEMCONSOLE_FERNET_KEYS=Fernet.generate_key().decode())
    for args in (("migrate", "-v0"), ("shell", "-c", WRITE_ONE)):
        assert _manage(keyed, *args).returncode == 0
    without_key = clean_env(MEMCONSOLE_VAR_DIR=tmp_path)

    done = _manage(without_key, "memory_health", "--json")

    assert done.returncode == 2, done.stderr[-2000:]
    checks = {check["id"]: check for check in json.loads(done.stdout)["checks"]}
    assert checks["encryption"]["status"] == "ERROR" and "MEMCONSOLE_FERNET_KEYS" in checks["encryption"]["detail"]
