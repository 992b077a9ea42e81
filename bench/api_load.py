"""Benchmark 5: the bot API under load, on a real gunicorn server on loopback.

For each backend, a fresh database and index are loaded with N episodes (default 5,000, embedded
with the real model through the cache) over 8 chats, a bot token is created, and `make run`'s
server (gunicorn with memconsole.gunicorn_config) is started on a free loopback port. A load
generator of 8 client threads (keep-alive connections, standard library only) then sends
`POST /api/v1/remember` and, separately, `POST /api/v1/recall`, each phase bounded by a request
count and a time limit. Reported: request rate, p50/p95/p99 latency, errors (must be 0).

Backends:
- `sqlite`: `make run`'s defaults: SQLite (WAL) and the embedded Chroma index, 1 worker x 4 threads;
- `postgres`: PostgreSQL (database `bench_perf` on 127.0.0.1:5432, recreated) and a Chroma server
  (`chroma run` on a free port), 2 workers x 4 threads.

The baseline is the same operation called in-process, one at a time, on the same data (no HTTP,
no server): the ratio shows what the HTTP layer, auth, JSON and concurrency cost or gain.

The client shares the machine's cores with the server (and, for `postgres`, with PostgreSQL and
Chroma): on a small machine the figures are a floor, not the server's capacity.

    .venv/bin/python -m bench.api_load [--backend sqlite|postgres|all] [--requests 400] [--seconds 30]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import corpus, dataset, harness

CLIENTS = 8
CHATS = 8
HOST = "127.0.0.1"
PG_URL = "postgres://postgres@127.0.0.1:5432/bench_perf"
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
TARGET = "0 errors (no rate target in issue 7)"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_http(url: str, timeout: float, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(
                f"bench: {url} process exited ({process.returncode}):\n{log.read_text(errors='replace')[-3000:]}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"bench: {url} did not answer within {timeout:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def recreate_postgres_database() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute("DROP DATABASE IF EXISTS bench_perf WITH (FORCE)")
            conn.execute("CREATE DATABASE bench_perf")
        return True
    except Exception as exc:  # psycopg raises its own hierarchy; any failure means "not available"
        print(f"  .. PostgreSQL not available ({exc}); skipping the postgres backend")
        return False


def start_chroma(workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    executable = Path(sys.executable).with_name("chroma")
    command = str(executable) if executable.exists() else shutil.which("chroma")
    if not command:
        raise SystemExit("bench: the `chroma` CLI is missing (it ships with chromadb)")
    port = free_port()
    log = workdir / "chroma-server.log"
    process = subprocess.Popen(
        [command, "run", "--path", str(workdir / "chroma-server"), "--host", HOST, "--port", str(port)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    wait_http(f"http://{HOST}:{port}/api/v2/heartbeat", 60, process, log)
    return process, port


def start_gunicorn(env: dict[str, str], workdir: Path, workers: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    log = workdir / "gunicorn.log"
    process = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")),
            "memconsole.wsgi",
            "--config",
            "python:memconsole.gunicorn_config",
            "--bind",
            f"{HOST}:{port}",
        ],
        cwd=harness.ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **env, "WEB_CONCURRENCY": str(workers), "PYTHONPATH": str(harness.ROOT)},
    )
    wait_http(f"http://{HOST}:{port}/healthz", 60, process, log)
    return process, port


class Load:
    """CLIENTS threads sending requests until `count` are sent or `seconds` have passed."""

    def __init__(
        self, port: int, token: str, path: str, bodies: list[dict[str, Any]], count: int, seconds: float
    ) -> None:
        self.port, self.token, self.path, self.bodies = port, token, path, bodies
        self.count, self.seconds = count, seconds
        self.lock = threading.Lock()
        self.sent = 0
        self.latencies: list[float] = []
        self.errors: list[str] = []

    def _next(self) -> dict[str, Any] | None:
        with self.lock:
            if self.sent >= self.count or time.perf_counter() > self.deadline:
                return None
            body = self.bodies[self.sent % len(self.bodies)]
            self.sent += 1
            return body

    def _client(self) -> None:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=60)
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        while (body := self._next()) is not None:
            data = json.dumps(body).encode()
            started = time.perf_counter()
            try:
                conn.request("POST", self.path, body=data, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                elapsed = time.perf_counter() - started
                ok = 200 <= response.status < 300
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
            except (OSError, http.client.HTTPException) as exc:
                elapsed, ok, payload = time.perf_counter() - started, False, str(exc).encode()
                conn.close()
                conn = http.client.HTTPConnection(HOST, self.port, timeout=60)
                response = None
            with self.lock:
                self.latencies.append(elapsed)
                if not ok:
                    status = response.status if response is not None else "connection"
                    self.errors.append(f"{status}: {payload[:200]!r}")
        conn.close()

    def run(self) -> dict[str, Any]:
        self.deadline = time.perf_counter() + self.seconds
        threads = [threading.Thread(target=self._client, daemon=True) for _ in range(CLIENTS)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        timing = harness.Timing(self.latencies)
        return {
            "requests": len(self.latencies),
            "seconds": round(wall, 2),
            "per_s": round(len(self.latencies) / wall, 1),
            "p50_ms": round(timing.median_ms, 1),
            "p95_ms": round(timing.p95_ms, 1),
            "p99_ms": round(timing.p99_ms, 1),
            "errors": len(self.errors),
            "clients": CLIENTS,
        }


def run_backend(backend: str, n: int, count: int, seconds: float, workdir: Path) -> list[harness.Record]:
    chroma_process = None
    database_url, chroma_host, chroma_port, workers = "", "", 0, 1
    if backend == "postgres":
        if not recreate_postgres_database():
            return []
        chroma_process, chroma_port = start_chroma(workdir)
        database_url, chroma_host, workers = PG_URL, HOST, 2
    try:
        return _measure(backend, n, count, seconds, workdir, database_url, chroma_host, chroma_port, workers)
    finally:
        if chroma_process is not None:
            stop(chroma_process)


def load_indexed_chats(backend: str, n: int, token_name: str) -> tuple[list[Any], str]:
    """`n` corpus episodes over CHATS chats, bulk-loaded and indexed with the cached real-model
    vectors, and a bot token for them: (the chats' scope keys, the token's secret)."""
    from memconsole.memory import sync, tokens
    from memconsole.memory.audit import Actor
    from memconsole.memory.models import Episode

    chats = [dataset.scope_keys(f"group_{900 + i}") for i in range(CHATS)]
    vecs = dataset.cached_embeddings(n)
    dataset.bulk_load(((chats[i % CHATS], t) for i, t in enumerate(corpus.texts(n))), n, say=lambda _m: None)
    for keys in chats:
        rows = list(Episode.objects.in_scope(keys.user_key).order_by("pk"))
        for start in range(0, len(rows), 2000):
            part = rows[start : start + 2000]
            sync.index_episodes(part, vecs[[int(e.episode_id, 16) for e in part]])
    _token, secret = tokens.create_token(token_name, [dataset.BOT], Actor.system("bench"))
    harness.progress(f"{backend}: {n:,} episodes loaded and indexed over {CHATS} chats")
    return chats, secret


def remember_request(chats: list[Any], text: Any, i: int) -> dict[str, Any]:
    """The body of `POST /api/v1/remember` for corpus text `text`, in chat `i % CHATS`."""
    return {
        "bot_uuid": dataset.BOT,
        "session_name": chats[i % CHATS].session_name,
        "content": text.content,
        "tags": text.tags,
        "importance": text.importance,
        "sender_id": text.speaker.sender_id,
        "sender_name": text.speaker.name,
    }


def _measure(
    backend: str,
    n: int,
    count: int,
    seconds: float,
    workdir: Path,
    database_url: str,
    chroma_host: str,
    chroma_port: int,
    workers: int,
) -> list[harness.Record]:
    harness.setup_django(workdir, database_url, chroma_host, chroma_port)
    from django.db import connections

    from memconsole.lib import vectors
    from memconsole.memory import episodes, retrieval
    from memconsole.memory.audit import Actor

    harness.require_real_model()
    chats, secret = load_indexed_chats(backend, n, "bench load")

    fresh = list(corpus.texts(n + 2 * count + 100))[n:]
    queries = corpus.queries(count + 50)

    def remember_body(i: int) -> dict[str, Any]:
        return remember_request(chats, fresh[i], i)

    def recall_body(i: int) -> dict[str, Any]:
        return {
            "bot_uuid": dataset.BOT,
            "session_name": chats[i % CHATS].session_name,
            "query": queries[i],
            "top_k": 10,
        }

    # Baseline: the same operations in-process, one at a time, before the server shares the data.
    actor = Actor.system("bench")
    base_n = min(100, count)
    base_remember = harness.measure_each(
        lambda i: episodes.remember(
            chats[i % CHATS],
            actor,
            fresh[count + i].content,
            tags=fresh[count + i].tags,
            sender_id=fresh[count + i].speaker.sender_id,
        ),
        list(range(base_n)),
        warmup=0,
    )
    base_recall = harness.measure_each(
        lambda i: retrieval.recall(chats[i % CHATS], queries[count + (i % 50)], top_k=10), list(range(base_n))
    )
    connections.close_all()
    vectors.reset_client()  # the embedded index is single-process: let the server open it alone
    import gc

    gc.collect()

    env = harness.bench_environment(workdir, database_url, chroma_host, chroma_port)
    measured = harness.measuring()
    measured.__enter__()
    server, port = start_gunicorn(env, workdir, workers)
    try:
        remember = Load(
            port, secret, "/api/v1/remember", [remember_body(i) for i in range(count)], count, seconds
        ).run()
        harness.progress(
            f"{backend} remember: {remember['per_s']}/s, p95 {remember['p95_ms']} ms, {remember['errors']} errors"
        )
        recall_load = Load(port, secret, "/api/v1/recall", [recall_body(i) for i in range(count)], count, seconds)
        recall = recall_load.run()
        harness.progress(f"{backend} recall: {recall['per_s']}/s, p95 {recall['p95_ms']} ms, {recall['errors']} errors")
    finally:
        stop(server)
        measured.__exit__(None, None, None)

    config = (
        "SQLite (WAL) + embedded Chroma, gunicorn 1 worker x 4 threads"
        if backend == "sqlite"
        else "PostgreSQL + Chroma server, gunicorn 2 workers x 4 threads"
    )
    records = []
    for name, figures, base in (("remember", remember, base_remember), ("recall", recall, base_recall)):
        in_process_rate = len(base.samples) / sum(base.samples)
        records.append(
            harness.Record(
                name=f"api.{name}.{backend}",
                figures={"server": config, "episodes_loaded": n, **figures, "other_cpu_share": measured.share},
                baseline={
                    "name": f"operations.{name} in-process, one at a time, same data (no HTTP)",
                    "figures": {
                        "requests": len(base.samples),
                        "per_s": round(in_process_rate, 1),
                        "p50_ms": round(base.median_ms, 1),
                        "p95_ms": round(base.p95_ms, 1),
                    },
                    "ratio_of": "HTTP requests per second (8 clients) / in-process calls per second",
                },
                ratio=harness.ratio(figures["per_s"], in_process_rate),
                target=TARGET,
                met=figures["errors"] == 0,
            )
        )
    return records


def main() -> None:
    args = harness.arguments(
        "Bot API load test on a real gunicorn server",
        episodes=5000,
        extra=_options,
    )
    if args.backend == "all":
        for backend in ("sqlite", "postgres"):
            command = [
                sys.executable,
                "-m",
                "bench.api_load",
                "--backend",
                backend,
                "--episodes",
                str(args.episodes),
                "--requests",
                str(args.requests),
                "--seconds",
                str(args.seconds),
            ]
            subprocess.run(command, cwd=harness.ROOT, check=False, env={**os.environ, "PYTHONPATH": str(harness.ROOT)})
        return
    with harness.workspace(args.keep) as workdir:
        for record in run_backend(args.backend, args.episodes, args.requests, args.seconds, workdir):
            harness.report(record)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument("--requests", type=int, default=400, help="requests per phase at most (default 400)")
    parser.add_argument("--seconds", type=float, default=30, help="seconds per phase at most (default 30)")


if __name__ == "__main__":
    main()
