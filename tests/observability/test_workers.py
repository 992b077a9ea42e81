"""/metrics under two gunicorn workers: whichever worker answers a scrape, the series add up every
worker's requests (prometheus-client's multiprocess mode, set up by gunicorn_config.py), and a
worker that dies leaves its counts in the total.

SQLite and sync workers; CHROMA_HOST names a port where nothing listens, because more than one
worker needs a Chroma server (gunicorn_config.py) and nothing here touches the vector index.
"""

from __future__ import annotations

import os
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.conftest import Client, Gunicorn, clean_env, manage

TOKEN = "two-workers-metrics-token-0123456789"
WORKERS = 2
REQUESTS = 60
BATCHES = 10
LISTENING = re.compile(r"Listening at: http://[^:]+:(\d+)")


def healthz_count(client: Client) -> float:
    response = client.request("GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status == 200, response.text
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == "memconsole_http_request_duration_seconds_count" and sample.labels == {
                "route": "healthz",
                "method": "GET",
                "status": "200",
            }:
                return sample.value
    return 0.0


def wait_serving(server: Gunicorn, workers: int, timeout: float = 120) -> int:
    """Wait for `workers` booted workers and a 200 from /healthz (the one request it counts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"gunicorn exited {server.process.returncode}:\n{server.log()[-4000:]}")
        if not server.port:
            found = LISTENING.search(server.log())
            server.port = int(found[1]) if found else 0
        if server.port and len(server.worker_pids()) >= workers:
            try:
                if Client(server.port).get("/healthz").status == 200:
                    return 1
            except OSError:
                pass
        time.sleep(0.2)
    pytest.fail(f"gunicorn did not serve within {timeout:.0f} s:\n{server.log()[-4000:]}")


@pytest.fixture
def metrics_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "metrics"
    directory.mkdir()
    (directory / "counter_99999.db").write_bytes(b"left over from an earlier run")
    return directory


def test_it_adds_up_every_workers_series(tmp_path, metrics_dir):
    env = clean_env(
        tmp_path,
        WEB_CONCURRENCY=WORKERS,
        GUNICORN_THREADS=1,
        CHROMA_HOST="127.0.0.1",
        CHROMA_PORT=9,
        MEMCONSOLE_METRICS_TOKEN=TOKEN,
        PROMETHEUS_MULTIPROC_DIR=metrics_dir,
        MEMCONSOLE_ACCESS_LOG=0,
    )
    manage(env, "migrate", "--noinput")
    server = Gunicorn.start(env, tmp_path / "gunicorn.log")
    try:
        sent = wait_serving(server, WORKERS)
        client = Client(server.port)
        # Which worker accepts a connection is up to the kernel: on a busy machine one worker can
        # take a whole batch, so send batches (a bounded number) until both have served some.
        for _ in range(BATCHES):
            with ThreadPoolExecutor(8) as pool:
                statuses = list(pool.map(lambda _: client.get("/healthz").status, range(REQUESTS)))
            assert statuses == [200] * REQUESTS
            sent += REQUESTS
            served = server.served_by("GET", "/healthz", 200)
            if len(served) == WORKERS:
                break
        assert len(served) == WORKERS, f"one worker served every request: {served}"
        # Scrapes answered by either worker all see every worker's requests.
        assert {healthz_count(client) for _ in range(6)} == {sent}
        assert not (metrics_dir / "counter_99999.db").exists()  # the earlier run's files were wiped
        assert {f"histogram_{pid}.db" for pid in served} <= {path.name for path in metrics_dir.iterdir()}

        victim = sorted(served)[0]
        os.kill(victim, signal.SIGKILL)
        sent += wait_serving(server, WORKERS + 1)  # gunicorn boots a replacement
        assert healthz_count(client) == sent  # the dead worker's requests still count
    finally:
        server.stop()
    assert list(metrics_dir.glob("*.db")) == []  # on_exit clears the directory
