"""The production path, for real: PostgreSQL, a Chroma server and gunicorn with 4 workers.

One deployment per module (migrate, collectstatic, an admin and two bot tokens, gunicorn with
production settings behind a pretend TLS proxy), then the console and the API are driven over
HTTP while several clients write at once. Workers are sync (GUNICORN_THREADS=1) so that
concurrent requests must spread over processes; the access log names the worker of each request.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from cryptography.fernet import Fernet

from .conftest import Client, Gunicorn, clean_env, manage, script_json

pytestmark = pytest.mark.chroma_server

WORKERS = 4
CLIENTS = 8
RATE_PER_MINUTE = 60
BOT = "deploy-bot"
PASSWORD = "deploy-horse-battery-staple"


@dataclass
class Deployment:
    server: Gunicorn
    env: dict[str, str]
    writer_token: str
    limited_token: str

    def client(self) -> Client:
        return Client(self.server.port)

    def state(self, session: str) -> dict:
        return script_json(self.env, "scope_state.py", {"bot": BOT, "session": session})


@pytest.fixture(scope="module")
def deployment(postgres_url, chroma_server, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("deployment")
    chroma_host, chroma_port = chroma_server
    env = clean_env(
        tmp_path,
        MEMCONSOLE_ENV="production",
        SECRET_KEY=secrets.token_urlsafe(50),
        MEMCONSOLE_AUDIT_KEY=secrets.token_hex(32),
        MEMCONSOLE_FERNET_KEYS=Fernet.generate_key().decode(),
        DATABASE_URL=postgres_url,
        CHROMA_HOST=chroma_host,
        CHROMA_PORT=chroma_port,
        ALLOWED_HOSTS="127.0.0.1",
        MEMCONSOLE_BEHIND_PROXY="1",
        MEMCONSOLE_STATIC_ROOT=str(tmp_path / "static"),
        MEMCONSOLE_API_RATE_PER_MINUTE=RATE_PER_MINUTE,
        WEB_CONCURRENCY=WORKERS,
        GUNICORN_THREADS=1,
    )
    with ThreadPoolExecutor(max_workers=2) as pool:  # independent steps: run them side by side
        steps = [
            pool.submit(manage, env, "migrate", "--noinput", "-v", "0"),
            pool.submit(manage, env, "collectstatic", "--noinput", "-v", "0"),  # production storage needs its manifest
        ]
        for step in steps:
            step.result()
    created = script_json(env, "create_accounts.py", {"password": PASSWORD, "bot": BOT})
    server = Gunicorn.start(env, tmp_path / "gunicorn.log")
    try:
        server.wait_ready(workers=WORKERS)
        yield Deployment(server, env, created["writer"], created["limited"])
    finally:
        server.stop()


def _in_parallel(function, items) -> list:
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        return list(pool.map(function, items))


def test_it_starts_four_workers_on_the_chroma_server(deployment):
    assert len(set(deployment.server.worker_pids())) == WORKERS
    response = deployment.client().get("/readyz")
    assert response.status == 200
    assert response.json()["checks"] == {"database": "ok", "vector_index": "ok"}


def test_it_keeps_a_console_session_across_workers(deployment):
    client = deployment.client()
    assert client.get("/").status == 302  # anonymous: to the login page

    login = client.login("deploy-admin", PASSWORD)

    assert login.status == 302, login.text[:500]
    assert login.headers["Location"] == "/"
    assert "sessionid" in client.cookies
    assert "Secure" in ";".join(login.headers.get_all("Set-Cookie"))
    pages = _in_parallel(lambda _: client.get("/"), range(CLIENTS * 4))
    assert [page.status for page in pages] == [200] * len(pages), [p.text[:300] for p in pages if p.status != 200]
    assert all("Strict-Transport-Security" in page.headers for page in pages)
    served = deployment.server.served_by("GET", "/", status=200)
    assert len(served) >= 2, f"every page came from one worker ({served}); the session was not shared"
    assert served <= set(deployment.server.worker_pids())


def test_it_locks_out_a_guessed_login_on_every_worker(deployment):
    client = deployment.client()
    assert client.get("/accounts/login/").status == 200  # the CSRF cookie
    limit = 5  # MEMCONSOLE_LOGIN_FAILURE_LIMIT's default

    def guess(number: int):
        form = {
            "username": "deploy-guessed",
            "password": f"guess-{number}",
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        }
        return client.post_form("/accounts/login/", form)

    guesses = _in_parallel(guess, range(limit))  # at once, so several workers count them
    right = client.post_form(
        "/accounts/login/",
        {"username": "deploy-guessed", "password": PASSWORD, "csrfmiddlewaretoken": client.cookies["csrftoken"]},
    )

    # The form again with its error, and the guess that reaches the limit is already refused:
    # every failure was counted once, whichever worker took it.
    assert sorted(g.status for g in guesses) == [200] * (limit - 1) + [429]
    assert right.status == 429, "the failures counted by all workers add up to a lockout"
    assert "sessionid" not in client.cookies


def test_it_writes_from_every_worker_into_one_audit_chain_and_loses_nothing(deployment):
    session = "group_writes"
    scope = {"bot_uuid": BOT, "session_name": session, "isolation": "session"}
    client = deployment.client()

    def remember(number: int):
        return client.post_json(
            "/api/v1/remember",
            {**scope, "content": f"Deployment fact number {number}: the build is green", "sender_id": f"u{number % 3}"},
            deployment.writer_token,
        )

    def add_trait(number: int):
        return client.post_json(
            "/api/v1/profile", {**scope, "add_traits": [f"trait {number}"]}, deployment.writer_token
        )

    writes = _in_parallel(remember, range(CLIENTS * 3))
    traits = _in_parallel(add_trait, range(CLIENTS))

    assert [w.status for w in writes] == [201] * len(writes), [w.text[:300] for w in writes if w.status != 201]
    assert [t.status for t in traits] == [200] * len(traits), [t.text[:300] for t in traits if t.status != 200]
    acknowledged = [w.json()["episode_id"] for w in writes]
    assert len(set(acknowledged)) == len(acknowledged)
    assert len(deployment.server.served_by("POST", "/api/v1/remember", status=201)) >= 2

    state = deployment.state(session)
    assert state["chain_ok"], state["chain_reason"]
    chains = state["chains"]
    assert state["chain_checked"] == sum(len(seqs) for seqs in chains.values())
    for seqs in chains.values():  # each chain: no gap, no fork
        assert seqs == list(range(1, len(seqs) + 1))
    assert len(chains[state["scope_key"]]) >= state["remember_entries"]  # the space's writes are in its own chain
    assert sorted(state["episodes"]) == sorted(acknowledged)  # every 201 is stored, nothing else
    assert state["remember_entries"] == len(acknowledged)
    assert state["not_indexed"] == []
    assert state["vectors"] == sorted(acknowledged)  # and every one is in the Chroma server
    assert sorted(state["traits"]) == sorted(f"trait {n}" for n in range(CLIENTS))  # no lost update
    assert state["profile_version"] == CLIENTS
    assert state["versions"] == list(range(1, CLIENTS + 1))


def test_it_shares_the_api_rate_limit_across_workers(deployment):
    seconds = datetime.now(UTC).second
    if seconds > 50:  # the limit is per clock minute: keep the burst inside one
        time.sleep(61 - seconds)
    client = deployment.client()
    path = f"/api/v1/profile?bot_uuid={BOT}&session_name=group_rate&type=session"
    extra = 20

    def read(_):
        return client.request("GET", path, headers={"Authorization": f"Bearer {deployment.limited_token}"})

    responses = _in_parallel(read, range(RATE_PER_MINUTE + extra))

    statuses = [r.status for r in responses]
    assert statuses.count(200) == RATE_PER_MINUTE, sorted(set(statuses))
    assert statuses.count(429) == extra
    assert all(r.headers["Retry-After"] for r in responses if r.status == 429)
    assert len(deployment.server.served_by("GET", "/api/v1/profile")) >= 2


def test_its_docker_healthcheck_command_passes_against_the_server(deployment, dockerfile):
    """The HEALTHCHECK's python one-liner, pointed at this server's port, exits 0."""
    code = dockerfile.healthcheck_python().replace("127.0.0.1:8000", f"127.0.0.1:{deployment.server.port}")
    result = subprocess.run(
        [sys.executable, "-c", code], env=deployment.env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
