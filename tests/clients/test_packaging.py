"""`pip install ./clients/python` in a fresh virtual environment, and the installed package talking to a
live server from there (nothing of memconsole on its path)."""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

import pytest

from memconsole.memory import tokens
from memconsole.memory.audit import Actor
from tests.processes import REPO, clean_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCRIPT = Path(__file__).resolve().parent / "scripts" / "fresh_venv_client.py"


def test_it_installs_into_a_fresh_virtualenv_and_talks_to_the_server(tmp_path: Path, live_server):
    target = tmp_path / "fresh"
    venv.create(target, with_pip=True)
    python = target / "bin" / "python"
    env = clean_env()
    env.pop("PYTHONPATH", None)
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(REPO / "clients" / "python"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    secret = tokens.create_token("fresh venv", ["bot-a"], Actor.system("tests"))[1]
    run = subprocess.run(
        [str(python), str(SCRIPT), live_server.url, secret],
        cwd=tmp_path,  # not the checkout: only the installed package can be imported
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert answer["where"].startswith(str(target))
    assert answer["stored"]["status"] == "active"
    assert [hit["content"] for hit in answer["hits"]] == ["Alice lives in Paris"]
