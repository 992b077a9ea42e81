"""Run every benchmark (`make bench`), each in its own process with its own temporary database.

    make bench                                   # default sizes: a few minutes on 2 cores
    make bench BENCH_ARGS="--episodes 1000000"   # the issue's sizes (list/export 1M, search 100k)
    make bench BENCH_ARGS="--only search,export"
    make bench BENCH_ARGS="--episodes 1000000 --size reindex=100000 --size api_load=5000 --wait-quiet 3600"

`--episodes N` (default 100,000) sets the scale: the episode list and the export use N episodes,
search a tenth, reindex, the API load test and the retrieval-quality group chat's filler a twentieth
(`--size recall_quality=30000` is the issue's latency size), batched ingest a fiftieth, the
many-spaces store a fifth (100 vectors a space; `--size spaces=1000000` is issue 22's 10,000
spaces); embedding throughput always uses 2,000 texts, batch remember 8 batches of 256, the
space writers (PostgreSQL) 2 rounds of 15 s with 1 then 2 workers. Each
benchmark prints its table; the records go to bench/results/latest.json (started afresh by every
run), the machine and load to bench/results/run.json, and a summary is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import harness  # noqa: E402

BENCHMARKS = [
    "embedding",
    "search",
    "episode_list",
    "export",
    "ingest",
    "batch_remember",
    "reindex",
    "api_load",
    "recall_quality",
    "inject_usage",
    "spaces",
    "space_writers",
]


def commands(n: int) -> dict[str, list[str]]:
    return {
        "embedding": ["--texts", "2000"],
        "search": ["--episodes", str(max(1000, n // 10))],
        "episode_list": ["--episodes", str(n)],
        "export": ["--episodes", str(n)],
        "ingest": ["--episodes", str(max(500, n // 50)), "--remember", "300"],
        "batch_remember": ["--episodes", "2048", "--batches", "8"],  # batches of 256, whatever the scale
        "reindex": ["--episodes", str(max(500, n // 20))],
        "api_load": ["--episodes", str(max(1000, n // 20)), "--backend", "all"],
        "recall_quality": ["--episodes", str(max(2000, n // 20))],
        "inject_usage": ["--episodes", str(max(2000, n // 50)), "--queries", "200"],
        # 100 vectors a space: 200 spaces at the default scale; `--size spaces=1000000` is issue 22's 10,000.
        "spaces": ["--episodes", str(max(2000, n // 5)), "--backend", "all"],
        # PostgreSQL, 1 then 2 writers in their own spaces, 2 rounds of 15 s each, whatever the scale.
        "space_writers": ["--episodes", "2000", "--seconds", "15", "--rounds", "2"],
    }


def summary() -> str:
    try:
        records = json.loads(harness.RESULTS_FILE.read_text())
    except (OSError, ValueError):
        return "(no results)"
    rows = []
    for r in records:
        met = "n/a" if r["met"] is None else ("yes" if r["met"] else "NO")
        rows.append([r["name"], r["ratio"], r["baseline"].get("name", "")[:60], r["target"][:70], met])
    return harness.table(["benchmark", "ratio", "baseline", "target", "met"], rows)


def main() -> int:
    parser = argparse.ArgumentParser(description="Run memconsole's benchmarks")
    parser.add_argument(
        "--episodes", type=int, default=100_000, help="scale (default 100,000; the issue's is 1,000,000)"
    )
    parser.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--skip", default="", help="comma-separated benchmarks to leave out")
    parser.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="NAME=N",
        help="episodes for one benchmark, overriding the scale (e.g. --size reindex=100000)",
    )
    parser.add_argument("--keep-results", action="store_true", help="add to latest.json instead of starting afresh")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0,
        metavar="SECONDS",
        help="before each measurement (after its data is loaded), wait up to SECONDS for the machine to be "
        "under 15%% busy",
    )
    args = parser.parse_args()

    chosen = [b.strip() for b in args.only.split(",") if b.strip()] or list(BENCHMARKS)
    skipped = {b.strip() for b in args.skip.split(",") if b.strip()}
    unknown = [b for b in [*chosen, *skipped] if b not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)} (choose from {', '.join(BENCHMARKS)})")
    chosen = [b for b in chosen if b not in skipped]

    plan = commands(args.episodes)
    for item in args.size:
        name, _, value = item.partition("=")
        if name not in plan or not value.isdigit():
            parser.error(f"--size {item!r}: use NAME=N with NAME one of {', '.join(BENCHMARKS)}")
        flag = "--texts" if name == "embedding" else "--episodes"
        position = plan[name].index(flag)
        plan[name][position + 1] = value

    harness.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    if not args.keep_results:
        harness.RESULTS_FILE.write_text("[]\n")
    previous: list[dict[str, Any]] = []
    if args.keep_results and harness.RUN_FILE.exists():
        try:
            previous = [
                b for b in json.loads(harness.RUN_FILE.read_text()).get("benchmarks", []) if b["name"] not in chosen
            ]
        except (ValueError, KeyError, AttributeError):
            previous = []
    run_info = {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": harness.machine(),
        "model_dir": str(harness.model_dir()),
        "scale_episodes": args.episodes,
        "benchmarks": previous,
    }
    print(
        f"memconsole benchmarks on {run_info['machine']['cpu']} ({run_info['machine']['cores']} cores), "
        f"load average {harness.loadavg()}, scale {args.episodes:,} episodes"
    )
    failed = []
    for name in chosen:
        print(f"\n#### {name} {' '.join(plan[name])}", flush=True)
        load_before = harness.loadavg()
        code = harness.git_state()
        started = time.perf_counter()
        with harness.OtherLoad() as other:
            result = subprocess.run(
                [sys.executable, "-m", f"bench.{name}", *plan[name]],
                cwd=ROOT,
                check=False,
                env={**os.environ, "PYTHONPATH": str(ROOT), "BENCH_WAIT_QUIET": str(args.wait_quiet or "")},
            )
        seconds = round(time.perf_counter() - started, 1)
        run_info["benchmarks"].append(
            {
                "name": name,
                "args": plan[name],
                "seconds": seconds,
                "exit_code": result.returncode,
                "loadavg_before": load_before,
                "loadavg_after": harness.loadavg(),
                "other_processes_cpu_share": other.share,
                "git": code,
            }
        )
        harness.RUN_FILE.write_text(json.dumps(run_info, indent=2) + "\n")
        print(
            f"#### {name} done in {seconds} s (exit {result.returncode}); other processes used "
            f"{other.share if other.share is not None else '?'} of the machine's CPU meanwhile",
            flush=True,
        )
        if result.returncode != 0:
            failed.append(name)
    run_info["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    harness.RUN_FILE.write_text(json.dumps(run_info, indent=2) + "\n")

    print("\n#### summary (bench/results/latest.json)")
    print(summary())
    if failed:
        print(f"\nbenchmarks that failed to run: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
