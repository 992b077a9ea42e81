"""Benchmark: `remember` over HTTP with the write-behind indexer (issue 22), and read-your-writes.

For each backend (as bench.api_load: `sqlite` = SQLite + embedded Chroma, 1 gunicorn worker x 4
threads; `postgres` = PostgreSQL + a Chroma server, 2 workers x 4 threads), a fresh install with
`--episodes` indexed episodes over 8 chats, then:

- the baseline, in-process, one at a time: the bare synchronous embed + Chroma upsert of one
  episode (what every remember paid before write-behind, before any database work);
- `POST /api/v1/remember` from 8 clients (MEMCONSOLE_INDEXER=thread, the default): requests/s,
  p50/p95/p99, errors; target >= 2x the baseline's rate, p99 <= 250 ms, 0 errors;
- read-your-writes: each of 8 clients remembers an episode and recalls it at once (its own content
  as the query, top 5): the share found must be 100%.

    .venv/bin/python -m bench.write_behind [--backend sqlite|postgres|all] [--requests 400] [--seconds 30]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import api_load, corpus, harness

TARGET = ">= 2x the bare embed + upsert baseline in requests/s, p99 <= 250 ms, 0 errors, 100% read-your-writes"


def _post(conn: http.client.HTTPConnection, secret: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
    response = conn.getresponse()
    return response.status, json.loads(response.read() or b"{}")


def read_your_writes(port: int, secret: str, bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """8 clients, each: remember, then recall its content right away; how many were found."""
    found, checked, errors = [0], [0], [0]
    lock = threading.Lock()
    shares = [bodies[i :: api_load.CLIENTS] for i in range(api_load.CLIENTS)]

    def client(mine: list[dict[str, Any]]) -> None:
        conn = http.client.HTTPConnection(api_load.HOST, port, timeout=60)
        for body in mine:
            status, answer = _post(conn, secret, "/api/v1/remember", body)
            if status != 201:
                with lock:
                    errors[0] += 1
                continue
            query = {"bot_uuid": body["bot_uuid"], "session_name": body["session_name"], "query": body["content"]}
            status, hits = _post(conn, secret, "/api/v1/recall", {**query, "top_k": 5})
            ids = [hit["episode_id"] for hit in hits.get("episodes", [])] if status == 200 else []
            with lock:
                checked[0] += 1
                found[0] += answer["episode_id"] in ids
                errors[0] += status != 200
        conn.close()

    threads = [threading.Thread(target=client, args=(share,), daemon=True) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {
        "checked": checked[0],
        "found": found[0],
        "share": round(found[0] / checked[0], 4) if checked[0] else 0.0,
        "errors": errors[0],
    }


def run_backend(backend: str, n: int, count: int, seconds: float, workdir: Path) -> list[harness.Record]:
    chroma_process = None
    database_url, chroma_host, chroma_port, workers = "", "", 0, 1
    if backend == "postgres":
        if not api_load.recreate_postgres_database():
            return []
        chroma_process, chroma_port = api_load.start_chroma(workdir)
        database_url, chroma_host, workers = api_load.PG_URL, api_load.HOST, 2
    try:
        return _measure(backend, n, count, seconds, workdir, database_url, chroma_host, chroma_port, workers)
    finally:
        if chroma_process is not None:
            api_load.stop(chroma_process)


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
    import gc

    from django.db import connections

    from memconsole.lib import embeddings, vectors

    harness.require_real_model()
    chats, secret = api_load.load_indexed_chats(backend, n, "bench write-behind")
    fresh = list(corpus.texts(n + 3 * count + 2 * api_load.CLIENTS + 200))[n:]

    def body(i: int) -> dict[str, Any]:
        return api_load.remember_request(chats, fresh[i], i)

    # Baseline: the bare synchronous embed + Chroma upsert of one episode, in-process, one at a time.
    model_id = embeddings.current_model_id()
    base_n = min(100, count)

    def bare(i: int) -> None:
        keys, text = chats[i % api_load.CHATS], fresh[2 * count + i]
        vector = embeddings.embed([text.content])
        meta = {"user_key": keys.user_key, "status": "active", "sender_id": "", "importance": 2, "timestamp": 0.0}
        vectors.upsert(keys.user_key, model_id, [f"b{i:011x}"], vector, [meta])

    baseline = harness.measure_each(bare, list(range(base_n)))
    for keys in chats:  # the baseline's vectors are no episode's: out again before the server starts
        vectors.delete(keys.user_key, [f"b{i:011x}" for i in range(base_n)])
    connections.close_all()
    vectors.reset_client()  # the embedded index is single-process: let the server open it alone
    gc.collect()

    env = harness.bench_environment(workdir, database_url, chroma_host, chroma_port)
    measured = harness.measuring()
    measured.__enter__()
    server, port = api_load.start_gunicorn(env, workdir, workers)
    try:
        warm = [body(3 * count + i) for i in range(2 * api_load.CLIENTS)]  # each thread loads the model once
        api_load.Load(port, secret, "/api/v1/remember", warm, len(warm), seconds).run()
        load = api_load.Load(port, secret, "/api/v1/remember", [body(i) for i in range(count)], count, seconds)
        remember = load.run()
        harness.progress(
            f"{backend} remember: {remember['per_s']}/s, p99 {remember['p99_ms']} ms, {remember['errors']} errors"
        )
        checked = read_your_writes(port, secret, [body(count + i) for i in range(min(count, 200))])
        harness.progress(f"{backend} read-your-writes: {checked['found']}/{checked['checked']}")
    finally:
        api_load.stop(server)
        measured.__exit__(None, None, None)

    base_rate = len(baseline.samples) / sum(baseline.samples)
    config = (
        "SQLite (WAL) + embedded Chroma, gunicorn 1 worker x 4 threads"
        if backend == "sqlite"
        else "PostgreSQL + Chroma server, gunicorn 2 workers x 4 threads"
    )
    met = (
        remember["errors"] == 0
        and remember["p99_ms"] <= 250
        and remember["per_s"] >= 2 * base_rate
        and checked["share"] == 1.0
        and checked["errors"] == 0
    )
    return [
        harness.Record(
            name=f"write_behind.remember.{backend}",
            figures={
                "server": config,
                "indexer": "thread",
                "episodes_loaded": n,
                **remember,
                "read_your_writes": checked,
                "other_cpu_share": measured.share,
            },
            baseline={
                "name": "bare synchronous embed + Chroma upsert of one episode, in-process, one at a time",
                "figures": {"calls": len(baseline.samples), "per_s": round(base_rate, 1), "p50_ms": baseline.median_ms},
                "ratio_of": "HTTP remember requests per second (8 clients) / bare embed + upsert per second",
            },
            ratio=harness.ratio(remember["per_s"], base_rate),
            target=TARGET,
            met=met,
        )
    ]


def main() -> None:
    args = harness.arguments("remember over HTTP with write-behind indexing", episodes=5000, extra=_options)
    if args.backend == "all":
        for backend in ("sqlite", "postgres"):
            command = [
                sys.executable,
                "-m",
                "bench.write_behind",
                "--backend",
                backend,
                "--episodes",
                str(args.episodes),
            ]
            command += ["--requests", str(args.requests), "--seconds", str(args.seconds)]
            subprocess.run(command, cwd=harness.ROOT, check=False, env={**os.environ, "PYTHONPATH": str(harness.ROOT)})
        return
    with harness.workspace(args.keep) as workdir:
        for record in run_backend(args.backend, args.episodes, args.requests, args.seconds, workdir):
            harness.report(record)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument("--requests", type=int, default=400, help="remember requests at most (default 400)")
    parser.add_argument("--seconds", type=float, default=30, help="seconds of the remember phase at most (default 30)")


if __name__ == "__main__":
    main()
