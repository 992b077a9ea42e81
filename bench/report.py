"""Print bench/results/latest.json (and run.json) as a Markdown table, for docs/benchmarks.md.

.venv/bin/python -m bench.report
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness

HEADLINE = {
    # record name prefix -> (figure keys shown for memconsole, for the baseline)
    "embedding": (["texts_per_s"], ["texts_per_s"]),
    "search": (
        ["recall_median_ms", "recall_p95_ms", "search_median_ms", "recall_at_10"],
        ["search_median_ms", "recall_at_10"],
    ),
    "episode_list.console": (["median_ms", "p95_ms"], ["median_ms"]),
    "episode_list.operations": (["page1_median_ms", "deep_median_ms"], ["page1_median_ms", "deep_median_ms"]),
    "export": (["episodes_per_s", "peak_rss_mb", "peak_rss_growth_vs_baseline_mb"], ["episodes_per_s", "peak_rss_mb"]),
    "ingest": (["per_s", "median_ms"], ["per_s"]),
    "batch_remember": (["episodes_per_s", "median_ms"], ["episodes_per_s"]),
    "reindex": (["episodes_per_s", "check_episodes_per_s"], ["episodes_per_s"]),
    "api": (["per_s", "p50_ms", "p95_ms", "p99_ms", "errors"], ["per_s", "p50_ms"]),
    "space_writers": (
        ["episodes_per_s", "lock_wait_backend_share", "audit_head_lock_ms_per_episode"],
        ["episodes_per_s", "lock_wait_backend_share", "audit_head_lock_ms_per_episode"],
    ),
}


def _pick(name: str) -> tuple[list[str], list[str]]:
    for prefix, keys in HEADLINE.items():
        if name.startswith(prefix):
            return keys
    return [], []


def _value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _figures(figures: dict[str, Any], keys: list[str]) -> str:
    return ", ".join(f"{key} {_value(figures[key])}" for key in keys if key in figures)


def markdown(records: list[dict[str, Any]]) -> str:
    lines = [
        "| benchmark | memconsole | baseline | ratio | target | met | other CPU |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        ours, theirs = _pick(r["name"])
        base = r["baseline"]
        met = "n/a" if r["met"] is None else ("yes" if r["met"] else "**no**")
        other = r["figures"].get("other_cpu_share")
        lines.append(
            f"| `{r['name']}` | {_figures(r['figures'], ours)} | {base.get('name', '')}: "
            f"{_figures(base.get('figures', {}), theirs)} | {_value(r['ratio'])} | {r['target']} | {met} | "
            f"{'-' if other is None else f'{other:.0%}'} |"
        )
    return "\n".join(lines)


def main() -> None:
    records = json.loads(harness.RESULTS_FILE.read_text())
    print(markdown(records))
    if harness.RUN_FILE.exists():
        run = json.loads(harness.RUN_FILE.read_text())
        m = run.get("machine", {})
        print(
            f"\nMachine: {m.get('cpu')}, {m.get('cores')} cores, {m.get('memory_gb')} GB, Python {m.get('python')}, "
            f"{m.get('platform')}; started {run.get('started')}, finished {run.get('finished', '?')}"
        )
        for b in run.get("benchmarks", []):
            print(
                f"- {b['name']} {' '.join(b['args'])}: {b['seconds']} s, commit {b.get('git', {}).get('commit', '?')}"
                f" (+{b.get('git', {}).get('modified_files', '?')} modified files), other processes "
                f"{b.get('other_processes_cpu_share')} over the whole benchmark"
            )


if __name__ == "__main__":
    main()
