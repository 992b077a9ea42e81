"""Benchmark: a bot's `remember` while a large console import job runs (issue 21).

`make run`'s shape: gunicorn with memconsole.gunicorn_config, one worker, SQLite (WAL), the embedded
Chroma index and the job worker inside the web process. A bot token is created and `remember` is
called one at a time: first with nothing else running (the baseline, same run, same server), then
while an import job of N episodes (default 20,000) runs, its samples split by the job's stage
(writing: the batches that take SQLite's write lock; indexing: embedding, no lock). Reported:
median, p95 and max latency of each, errors (must be 0) and the ratio of the p95 while the import
writes to the idle p95. The measurement stops after `--samples` requests in the indexing stage
(the rest of the indexing is not waited for).

    .venv/bin/python -m bench.import_job [--episodes 20000] [--samples 40]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import api_load, harness

MANAGE = harness.ROOT / "manage.py"
SETUP = """
import json, sys
from memconsole.memory import tokens
from memconsole.memory.audit import Actor
print(json.dumps({"token": tokens.create_token("bench", ["bench-live"], Actor.system("bench"))[1]}))
"""
SUBMIT = """
import json, sys
from pathlib import Path
from memconsole.jobs.queue import submit
from memconsole.memory.audit import Actor
params = {"format": "langbot", "bot_uuid": "bench-bulk", "session_name": "group_bulk", "isolation": "session"}
job = submit("import", scope="bench-bulk:group_bulk:session", bot_uuid="bench-bulk", actor=Actor.system("bench"),
             params=params, data=Path(sys.argv[1]).read_bytes(), file_name="bulk.json")
print(json.dumps({"job_id": str(job.pk)}))
"""


def shell(env: dict[str, str], code: str, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()\n" + code, *args],
        cwd=harness.ROOT,
        env={**env, "PYTHONPATH": str(harness.ROOT)},
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def remember(url: str, token: str, number: int) -> tuple[float, int]:
    body = {"bot_uuid": "bench-live", "session_name": "group_live", "content": f"live note number {number}"}
    request = urllib.request.Request(
        f"{url}/api/v1/remember",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    began = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            status = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    return time.perf_counter() - began, status


def job_state(database: Path, job_id: str) -> tuple[str, str]:
    import sqlite3

    connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        row = connection.execute(
            "SELECT status, stage FROM memory_job WHERE id = ?", (job_id.replace("-", ""),)
        ).fetchone()
    finally:
        connection.close()
    return str(row[0]), str(row[1])


def figures(samples: list[float]) -> dict[str, Any]:
    if not samples:
        return {"n": 0}
    timing = harness.Timing(samples)
    return {**timing.summary(), "max_ms": round(max(samples) * 1000, 1)}


def main() -> None:
    def extra(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--samples", type=int, default=40, help="requests idle, and in the indexing stage")

    args = harness.arguments(__doc__.splitlines()[0], 20_000, extra)
    with harness.workspace(args.keep) as workdir:
        database = workdir / "db.sqlite3"
        env = {
            **harness.bench_environment(workdir, database_url=f"sqlite:///{database}"),
            "SECRET_KEY": "bench-import-job-" + "s" * 40,
        }
        (workdir / "static").mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(MANAGE), "migrate", "-v", "0"], cwd=harness.ROOT, env=env, check=True)
        token = shell(env, SETUP)["token"]
        upload = workdir / "bulk.json"
        episodes = [{"id": f"b{i}", "content": f"bulk fact {i} about topic {i % 50}"} for i in range(args.episodes)]
        upload.write_text(json.dumps({"version": 1, "scope_key": "old:group_bulk", "episodes": episodes}))
        server, port = api_load.start_gunicorn(env, workdir, 1)
        url = f"http://{api_load.HOST}:{port}"
        try:
            for number in range(5):  # warm-up: the model loads
                remember(url, token, number)
            idle, statuses = [], []
            for number in range(args.samples):
                seconds, status = remember(url, token, 100 + number)
                idle.append(seconds)
                statuses.append(status)
            job_id = shell(env, SUBMIT, str(upload))["job_id"]
            by_stage: dict[str, list[float]] = {"reading": [], "writing": [], "indexing": []}
            write_began = write_ended = 0.0
            number = 1000
            deadline = time.monotonic() + 1800
            while time.monotonic() < deadline and len(by_stage["indexing"]) < args.samples:
                status_before, stage_before = job_state(database, job_id)
                if status_before not in {"queued", "running"}:
                    break
                number += 1
                seconds, status = remember(url, token, number)
                statuses.append(status)
                status_after, stage_after = job_state(database, job_id)
                if stage_before == "writing" and not write_began:
                    write_began = time.monotonic()
                if stage_after == "indexing" and write_began and not write_ended:
                    write_ended = time.monotonic()
                if stage_before == stage_after and stage_before in by_stage and status_after == "running":
                    by_stage[stage_before].append(seconds)
        finally:
            api_load.stop(server)
    errors = sum(1 for status in statuses if status != 201)
    during, baseline = figures(by_stage["writing"]), figures(idle)
    record = harness.Record(
        name="import_job remember during an import's writing stage",
        figures={
            "episodes": args.episodes,
            "errors": errors,
            "writing": during,
            "indexing": figures(by_stage["indexing"]),
            "reading": figures(by_stage["reading"]),
            "writing_stage_seconds_approx": round(write_ended - write_began, 1) if write_ended else None,
        },
        baseline={
            "name": "remember on the same server, idle",
            "figures": baseline,
            "ratio_of": "writing p95 / idle p95",
        },
        ratio=harness.ratio(during.get("p95_ms", float("nan")), baseline.get("p95_ms", float("nan"))),
        target="0 errors (no latency target)",
        met=errors == 0,
    )
    harness.report(record)


if __name__ == "__main__":
    main()
