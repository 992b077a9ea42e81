"""Benchmark: writers in different spaces on PostgreSQL, 1 worker against 2 (issue 22).

Each worker is a process (its own Django, connection and temporary Chroma folder) calling
`episodes.remember` as fast as it can for `--seconds` into its own space (session
`space_writer_<n>`: its own scope_key and user_key), on a PostgreSQL database created for the run
(`bench_space_writers` on 127.0.0.1:5432, dropped afterwards). Workers start together at a
barrier; the 1-worker and 2-worker phases alternate `--rounds` times, so load changes meet both.

The write path, not the model: each worker embeds its texts (`--episodes` distinct ones, cycled)
with the lexical fallback embedder before the timed part, then `embeddings.embed` returns those
vectors (a look-up). No corrections (no supersede search). The vector index stays out of the timed
path where the code allows: with MEMCONSOLE_INDEXER the workers run `--indexer` (default `worker`:
vectors left pending, no job worker running); code without it upserts inside `remember`, and the
workers make `vectors.upsert` a no-op (`--with-upsert` keeps it, into their own Chroma folder).

Lock waits, two ways: a separate connection samples `pg_stat_activity` every `--interval-ms`
(share of samples where a bench backend waits with wait_event_type 'Lock', and of backend-samples
waiting), and each worker times its statements (`connection.execute_wrapper`), the audit chain
head's SELECT ... FOR UPDATE apart. Other processes' CPU share excludes this run's PostgreSQL
backends (read from /proc): they do the bench's own work.

Baseline: the same run's 1-worker phases. Target (issue 22): 2 workers >= 1.6x the episodes/s of
1 worker, lock waits reported and near 0 (at most 1% of backend-samples).

    .venv/bin/python -m bench.space_writers [--seconds 15] [--rounds 2] [--workers 1,2]
    .venv/bin/python -m bench.space_writers --seconds 60 --rounds 3 --episodes 10000   # a longer run
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import corpus, dataset, harness

DATABASE = "bench_space_writers"
PG_URL = f"postgres://postgres@127.0.0.1:5432/{DATABASE}"
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
SUPERSEDE_TAGS = {"correction", "clarification", "fact-update"}
TARGET_RATIO = 1.6
NEAR_ZERO = 0.01  # lock waits "near 0": at most this share of the bench backends' samples
WARMUP = 5
PG_SETTINGS = "'synchronous_commit', 'fsync', 'server_version'"
VECTOR_INDEX = {"none": "inline upsert", "inline": "inline upsert", "worker": "none (left pending: no job worker)"}
SAMPLE_SQL = (
    "SELECT wait_event_type, wait_event FROM pg_stat_activity "
    "WHERE datname = %s AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
)


@dataclass(frozen=True)
class Job:
    index: int
    workdir: Path
    indexer: str
    seconds: float
    pool: int
    with_upsert: bool


# --- set-up -------------------------------------------------------------------------------------


def configure(workdir: Path, chroma: str, indexer: str) -> None:
    """harness.setup_django's environment, but this process's Chroma folder, no model, the indexer."""
    for name in ("CHROMA_HOST", "CHROMA_PORT", "MEMCONSOLE_FERNET_KEYS_FILE", "DATABASE_URL_FILE", "SECRET_KEY_FILE"):
        os.environ.pop(name, None)
    os.environ["MEMCONSOLE_MODEL_DIR"] = str(workdir / "no-model")  # read by bench_environment
    for name, value in harness.bench_environment(workdir, PG_URL).items():
        if value or name != "CHROMA_HOST":
            os.environ[name] = value
    os.environ["CHROMA_PATH"] = str(workdir / f"chroma-{chroma}")
    os.environ["MEMCONSOLE_INDEXER"] = indexer
    (workdir / "static").mkdir(parents=True, exist_ok=True)
    import logging

    import django

    django.setup()
    logging.getLogger("memconsole.embeddings").setLevel(logging.ERROR)  # "no model": on purpose here


def indexer_mode() -> str:
    """MEMCONSOLE_INDEXER; "none" for code without it (before write-behind: `remember` upserts)."""
    from django.conf import settings

    return str(getattr(settings, "MEMCONSOLE_INDEXER", "none"))


def recreate_database(drop_only: bool = False) -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
            if not drop_only:
                conn.execute(f"CREATE DATABASE {DATABASE}")
        return True
    except Exception as exc:  # psycopg raises its own hierarchy; any failure means "not available"
        print(f"  .. PostgreSQL not available ({exc}); nothing measured")
        return False


def pool_texts(index: int, size: int) -> list[corpus.Text]:
    """`size` texts for worker `index` (no corrections: no supersede search), distinct per worker."""
    stream = (t for t in corpus.texts(size * (index + 1) * 2) if not SUPERSEDE_TAGS & set(t.tags))
    texts = list(stream)[size * index : size * (index + 1)]
    return texts or list(corpus.texts(1))


def process_cpu_seconds(pid: int) -> float | None:
    """utime + stime of any process on this machine (a PostgreSQL backend), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class StatementTimer:
    """`connection.execute_wrapper`: seconds in every statement, and in the audit head's lock."""

    def __init__(self) -> None:
        self.seconds = self.head_seconds = 0.0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            elapsed = time.perf_counter() - started
            self.seconds += elapsed
            if "FOR UPDATE" in sql and "audithead" in sql.lower():
                self.head_seconds += elapsed


def worker(job: Job, barrier: Any, results: Any, done: Any) -> None:
    try:
        results.put(_write(job, barrier))
    except Exception:
        barrier.abort()
        results.put({"index": job.index, "error": traceback.format_exc()})
    done.wait(600)


def _write(job: Job, barrier: Any) -> dict[str, Any]:
    configure(job.workdir, f"w{job.index}", job.indexer)
    import numpy as np
    from django.db import connection

    from memconsole.lib import embeddings, vectors
    from memconsole.memory import episodes
    from memconsole.memory.audit import Actor

    keys = dataset.scope_keys(f"space_writer_{job.index}")
    actor = Actor.system("bench")
    texts = pool_texts(job.index, job.pool)
    computed = embeddings.embed([t.content for t in texts])  # the lexical fallback, before timing
    lookup = {t.content.strip(): computed[i] for i, t in enumerate(texts)}
    embed = embeddings.embed

    def precomputed(batch: list[str], kind: embeddings.Kind = "passage") -> Any:
        if all(t in lookup for t in batch):
            return np.vstack([lookup[t] for t in batch])
        return embed(batch, kind)

    embeddings.embed = precomputed  # type: ignore[assignment]  # the bench measures writes, not the model
    upsert = vectors.upsert
    index_seconds = [0.0]

    stub = indexer_mode() == "none" and not job.with_upsert  # inline upserts: out of the measured path

    def timed_upsert(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return None if stub else upsert(*args, **kwargs)
        finally:
            index_seconds[0] += time.perf_counter() - started

    vectors.upsert = timed_upsert  # timed (or a no-op)

    def one(i: int) -> None:
        t = texts[i % len(texts)]
        episodes.remember(
            keys, actor, t.content, tags=t.tags, importance=t.importance,
            sender_id=t.speaker.sender_id, sender_name=t.speaker.name,
        )  # fmt: skip

    for i in range(WARMUP):
        one(i)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = int(cursor.fetchone()[0])
    timer = StatementTimer()
    index_seconds[0] = 0.0
    latencies: list[float] = []
    barrier.wait(300 + float(os.environ.get("BENCH_WAIT_QUIET") or 0))  # the parent may wait for quiet
    cpu0, backend0, started = harness.own_cpu_seconds(), process_cpu_seconds(backend), time.perf_counter()
    deadline = started + job.seconds
    with connection.execute_wrapper(timer):
        while (now := time.perf_counter()) < deadline:
            one(WARMUP + len(latencies))
            latencies.append(time.perf_counter() - now)
    wall = time.perf_counter() - started
    backend1 = process_cpu_seconds(backend)
    return {
        "index": job.index,
        "indexer": indexer_mode(),
        "vector_index": "no-op stub" if stub else VECTOR_INDEX.get(indexer_mode(), "write-behind thread"),
        "model_id": embeddings.current_model_id(),
        "episodes": len(latencies),
        "seconds": wall,
        "latencies": latencies,
        "cpu_s": harness.own_cpu_seconds() - cpu0,
        "backend_cpu_s": None if backend0 is None or backend1 is None else backend1 - backend0,
        "statement_s": timer.seconds,
        "head_lock_s": timer.head_seconds,
        "index_s": index_seconds[0],
    }


class LockSampler(threading.Thread):
    """Every `interval` seconds, the bench database's backends from pg_stat_activity."""

    def __init__(self, interval: float) -> None:
        super().__init__(name="lock-sampler", daemon=True)
        import psycopg

        self.interval = interval
        self.conn = psycopg.connect(PG_URL.replace("postgres://", "postgresql://", 1), autocommit=True)
        self.pid = int(self.conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
        self.stopping = threading.Event()
        self.samples = self.with_wait = self.backend_samples = self.waiting = 0
        self.events: Counter[str] = Counter()
        self.cpu0, self.cpu_s = process_cpu_seconds(self.pid), 0.0

    def run(self) -> None:
        while not self.stopping.is_set():
            rows = self.conn.execute(SAMPLE_SQL, (DATABASE,)).fetchall()
            locked = [r for r in rows if r[0] == "Lock"]
            self.samples += 1
            self.backend_samples += len(rows)
            self.waiting += len(locked)
            self.with_wait += bool(locked)
            self.events.update(f"{r[0]}:{r[1]}" for r in locked)
            self.stopping.wait(self.interval)

    def stop(self) -> None:
        self.stopping.set()
        self.join()
        cpu = process_cpu_seconds(self.pid)
        self.cpu_s = cpu - self.cpu0 if cpu is not None and self.cpu0 is not None else 0.0


class PhaseLoad(harness.Measuring):
    """harness.measuring() whose "ours" also counts the workers' and their backends' CPU time
    during the timed part (`extra`, set before exit: the workers are not waited for yet)."""

    def __init__(self) -> None:
        self.extra = 0.0

    def ours(self) -> float:
        return harness.own_cpu_seconds() + self.extra


# --- a phase and the run ------------------------------------------------------------------------


def phase(workers: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from django.db import connections

    connections.close_all()  # the sampler sees the workers' backends only
    context = multiprocessing.get_context("spawn")
    barrier, results, done = context.Barrier(workers + 1), context.Queue(), context.Event()
    jobs = [Job(i, workdir, args.indexer, args.seconds, args.episodes, args.with_upsert) for i in range(workers)]
    processes = [context.Process(target=worker, args=(job, barrier, results, done)) for job in jobs]
    for process in processes:
        process.start()
    sampler = LockSampler(args.interval_ms / 1000)
    load = PhaseLoad()
    try:
        with load:
            barrier.wait(300)
            sampler.start()
            outcomes = [results.get(timeout=args.seconds + 300) for _ in jobs]
            sampler.stop()  # its own backend's CPU, then the workers' and theirs:
            load.extra = sampler.cpu_s + sum(o.get("cpu_s", 0.0) + (o.get("backend_cpu_s") or 0.0) for o in outcomes)
    except threading.BrokenBarrierError:
        outcomes = [results.get(timeout=60) for _ in jobs]
    finally:
        if sampler.is_alive():
            sampler.stop()
        sampler.conn.close()
        done.set()
        for process in processes:
            process.join(60)
    errors = [o["error"] for o in outcomes if "error" in o]
    if errors:
        raise SystemExit("bench: a worker failed:\n" + "\n".join(errors))
    counts = {k: getattr(sampler, k) for k in ("samples", "with_wait", "backend_samples", "waiting")}
    return {"outcomes": outcomes, "events": sampler.events, "share": load.share, **counts}


def summarise(workers: int, phases: list[dict[str, Any]]) -> dict[str, Any]:
    """One worker count's phases over every round: rates averaged, waits and times over them all."""
    outcomes = [o for p in phases for o in p["outcomes"]]
    n, per = sum(o["episodes"] for o in outcomes), 1000 / max(1, sum(o["episodes"] for o in outcomes))
    rates = [round(sum(o["episodes"] / o["seconds"] for o in p["outcomes"]), 1) for p in phases]
    walls = [max(o["seconds"] for o in p["outcomes"]) for p in phases]
    timing = harness.Timing([x for o in outcomes for x in o["latencies"]])
    total = {k: sum(p[k] for p in phases) for k in ("samples", "with_wait", "backend_samples", "waiting")}
    head_s = sum(o["head_lock_s"] for o in outcomes)
    events: Counter[str] = sum((p["events"] for p in phases), Counter())
    shares = [p["share"] for p in phases if p["share"] is not None]
    return {
        "workers": workers,
        "rounds": len(phases),
        "episodes": n,
        "episodes_per_s": round(sum(rates) / len(rates), 1),
        "episodes_per_s_each_round": rates,
        "median_ms": round(timing.median_ms, 2),
        "p95_ms": round(timing.p95_ms, 2),
        "lock_wait_sample_share": round(total["with_wait"] / max(total["samples"], 1), 4),
        "lock_wait_backend_share": round(total["waiting"] / max(total["backend_samples"], 1), 4),
        "lock_wait_s_estimate": round(
            sum(p["waiting"] * w / max(p["samples"], 1) for p, w in zip(phases, walls, strict=True)), 3
        ),
        "lock_events": dict(events.most_common(5)),
        "samples": total["samples"],
        "audit_head_lock_ms_per_episode": round(head_s * per, 3),
        "audit_head_lock_share_of_time": round(head_s / (sum(walls) * workers), 4),
        "statements_ms_per_episode": round(sum(o["statement_s"] for o in outcomes) * per, 3),
        "vector_upsert_ms_per_episode": round(sum(o["index_s"] for o in outcomes) * per, 3),
        "worker_cpu_s": round(sum(o["cpu_s"] for o in outcomes), 2),
        "backend_cpu_s": round(sum(o["backend_cpu_s"] or 0.0 for o in outcomes), 2),
        "cpu_ms_per_episode": round(sum(o["cpu_s"] + (o["backend_cpu_s"] or 0.0) for o in outcomes) * per, 2),
        "cores_used": round(sum(o["cpu_s"] + (o["backend_cpu_s"] or 0.0) for o in outcomes) / sum(walls), 2),
        "other_cpu_share": round(max(shares), 3) if shares else None,  # the busiest phase
        "indexer": outcomes[0]["indexer"],
        "vector_index": outcomes[0]["vector_index"],
        "embedder": outcomes[0]["model_id"],
    }


def postgres_settings() -> dict[str, str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT name, setting FROM pg_settings WHERE name IN ({PG_SETTINGS})")
        return dict(cursor.fetchall())


def check(spaces: int, written: int) -> tuple[bool, str]:
    """Every acknowledged episode is stored in its space and the audit chain verifies."""
    from memconsole.memory import audit
    from memconsole.memory.models import Episode

    keys = [dataset.scope_keys(f"space_writer_{i}").user_key for i in range(spaces)]
    stored, report = sum(Episode.objects.in_scope(k).count() for k in keys), audit.verify_audit_chain()
    return stored == written and bool(report.ok), f"{stored:,} episodes stored of {written:,} written; {report}"


def run(args: argparse.Namespace, workdir: Path) -> harness.Record | None:
    counts = [int(x) for x in args.workers.split(",") if x.strip()]
    if not recreate_database():
        return None
    try:
        configure(workdir, "parent", args.indexer)
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
        pg = postgres_settings()
        harness.progress(f"PostgreSQL {pg.get('server_version')}: database {DATABASE}, indexer {indexer_mode()}")
        by_count: dict[int, list[dict[str, Any]]] = {n: [] for n in counts}
        for round_ in range(args.rounds):
            for n in counts:
                by_count[n].append(phase(n, args, workdir))
                f = summarise(n, by_count[n][-1:])
                harness.progress(
                    f"round {round_ + 1}, {n} worker(s): {f['episodes_per_s']} episodes/s, p95 {f['p95_ms']} ms, "
                    f"lock waits in {f['lock_wait_sample_share']:.1%} of samples, audit head lock "
                    f"{f['audit_head_lock_ms_per_episode']} ms/episode"
                )
        written = sum(o["episodes"] for ps in by_count.values() for p in ps for o in p["outcomes"])
        warmups = sum(n * WARMUP for n in counts) * args.rounds
        ok, checked = check(max(counts), written + warmups)
        harness.progress(checked)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            recreate_database(drop_only=True)
    base, ours = summarise(counts[0], by_count[counts[0]]), summarise(counts[-1], by_count[counts[-1]])
    lock_share = ours["lock_wait_backend_share"]
    ratio = harness.ratio(ours["episodes_per_s"], base["episodes_per_s"])
    ours.update({"consistent": ok, "synchronous_commit": pg.get("synchronous_commit"), "fsync": pg.get("fsync")})
    return harness.Record(
        name="space_writers.postgres",
        figures=ours,
        baseline={
            "name": f"{counts[0]} worker(s), same run, same write path",
            "figures": base,
            "ratio_of": f"episodes/s with {counts[-1]} workers / with {counts[0]}",
        },
        ratio=ratio,
        target=f">= {TARGET_RATIO:g}x the 1-worker episodes/s, lock waits near 0 (<= {NEAR_ZERO:.0%} of samples)",
        met=bool(ok and ratio is not None and ratio >= TARGET_RATIO and lock_share <= NEAR_ZERO),
        notes=[
            "write path only: lexical-fallback vectors computed before timing; no corrections (no supersede)",
            f"indexer: {ours['indexer']}; vector index in the timed path: {ours['vector_index']}",
            f"check: {checked}",
            "other_cpu_share excludes this run's PostgreSQL backends (their CPU is the bench's work)",
        ],
    )


def main() -> None:
    args = harness.arguments("Writers in different spaces on PostgreSQL: 1 worker vs 2", episodes=2000, extra=_options)
    with harness.workspace(args.keep) as workdir:
        record = run(args, workdir)
        if record is not None:
            harness.report(record)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=15, help="timed seconds per phase (default 15)")
    parser.add_argument("--rounds", type=int, default=2, help="1-worker and 2-worker phases, alternated (default 2)")
    parser.add_argument("--workers", default="1,2", help="worker counts, baseline first, measured last (default 1,2)")
    parser.add_argument("--interval-ms", type=float, default=10, help="pg_stat_activity sampling (default 10 ms)")
    parser.add_argument("--with-upsert", action="store_true", help="code without MEMCONSOLE_INDEXER: keep its upsert")
    parser.add_argument(
        "--indexer", choices=["worker", "thread", "inline"], default="worker", help="MEMCONSOLE_INDEXER"
    )


if __name__ == "__main__":
    main()
