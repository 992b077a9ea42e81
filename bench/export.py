"""Benchmark 4: streaming a scope export to a file, speed and peak memory.

A scope of N episodes (default 100,000; the issue's size is 1,000,000) and one of N/10 are
bulk-loaded into one database; each is then exported with `exports.stream_scope_export` to a file
in a fresh child process, which reports its own peak RSS (`resource.getrusage(...).ru_maxrss`)
before and after the export. The N/10 export is the baseline: a streaming export's memory must
not grow with the scope.

    .venv/bin/python -m bench.export [--episodes 1000000]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import corpus, dataset, harness

if TYPE_CHECKING:
    from memconsole.memory.scopes import ScopeKeys

TARGET_RATE = 30_000
TARGET_RSS_MB = 50


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def child(workdir: Path, session_name: str, out: Path) -> None:
    """Runs in the child process: export one scope to `out`, print figures as JSON."""
    harness.setup_django(workdir, migrate=False)
    from memconsole.memory import exports
    from memconsole.memory.audit import Actor

    keys = dataset.scope_keys(session_name)
    before = rss_mb()
    started = time.perf_counter()
    with out.open("w", encoding="utf-8") as handle:
        for chunk in exports.stream_scope_export(keys, Actor.system("bench")):
            handle.write(chunk)
    seconds = time.perf_counter() - started
    peak = rss_mb()  # before the check below, which reads the whole file into memory
    with out.open(encoding="utf-8") as handle:
        count = len(json.load(handle)["episodes"]["episodes"])  # proves the file is valid JSON
    print(
        json.dumps(
            {
                "episodes": count,
                "seconds": seconds,
                "rss_before_mb": before,
                "peak_rss_mb": peak,
                "bytes": out.stat().st_size,
            }
        )
    )


def export_in_child(workdir: Path, session_name: str) -> dict[str, Any]:
    out = workdir / f"{session_name}.json"
    result = subprocess.run(
        [sys.executable, "-m", "bench.export", "--child", str(workdir), session_name, str(out)],
        cwd=harness.ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(harness.ROOT)},
    )
    if result.returncode != 0:
        raise SystemExit(f"bench: export child failed:\n{result.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    out.unlink(missing_ok=True)
    return figures


def run(n: int, workdir: Path) -> harness.Record:
    harness.setup_django(workdir)
    small_n = max(1, n // 10)
    big, small = dataset.scope_keys("group_export_big"), dataset.scope_keys("group_export_small")
    total = n + small_n

    def assignments() -> Iterator[tuple[ScopeKeys, corpus.Text]]:
        for position, text in enumerate(corpus.texts(total)):
            yield (small if position % 11 == 10 and position // 11 < small_n else big), text

    with harness.stopwatch() as elapsed:
        dataset.bulk_load(assignments(), total)
    harness.progress(f"bulk-loaded {total:,} episodes in {elapsed():.1f} s")
    from django.db import connection

    connection.close()  # the children open the database themselves

    with harness.measuring() as measured:
        small_fig = export_in_child(workdir, small.session_name)
        big_fig = export_in_child(workdir, big.session_name)
    harness.progress(
        f"export of {small_fig['episodes']:,}: {small_fig['seconds']:.2f} s, peak RSS {small_fig['peak_rss_mb']:.0f} MB"
    )
    harness.progress(
        f"export of {big_fig['episodes']:,}: {big_fig['seconds']:.2f} s, peak RSS {big_fig['peak_rss_mb']:.0f} MB"
    )

    def figures(f: dict[str, Any]) -> dict[str, Any]:
        return {
            "episodes": f["episodes"],
            "seconds": round(f["seconds"], 2),
            "episodes_per_s": round(f["episodes"] / f["seconds"]),
            "mb_written": round(f["bytes"] / 1e6, 1),
            "rss_before_export_mb": round(f["rss_before_mb"], 1),
            "peak_rss_mb": round(f["peak_rss_mb"], 1),
        }

    ours, base = figures(big_fig), figures(small_fig)
    growth = big_fig["peak_rss_mb"] - small_fig["peak_rss_mb"]
    ours["peak_rss_growth_vs_baseline_mb"] = round(growth, 1)
    ours["other_cpu_share"] = measured.share
    rate = ours["episodes_per_s"]
    return harness.Record(
        name="export.stream_scope_export",
        figures=ours,
        baseline={
            "name": f"the same export of a scope 10x smaller ({small_fig['episodes']:,} episodes)",
            "figures": base,
            "ratio_of": "peak RSS of the big export / peak RSS of the small one",
        },
        ratio=harness.ratio(big_fig["peak_rss_mb"], small_fig["peak_rss_mb"]),
        target=f">= {TARGET_RATE:,} episodes/s unencrypted, peak RSS growth <= {TARGET_RSS_MB} MB",
        met=rate >= TARGET_RATE and growth <= TARGET_RSS_MB,
    )


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))
        return
    args = harness.arguments("Streaming scope export: speed and peak RSS", episodes=100_000)
    with harness.workspace(args.keep) as workdir:
        harness.report(run(args.episodes, workdir))


if __name__ == "__main__":
    main()
