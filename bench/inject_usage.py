"""Benchmark: what counting memory usage costs `inject` (issue 18: within 10% of without).

N episodes (default 2,000) in one chat; `injection.record_injection` runs the same questions with
usage counting as shipped (one multi-row INSERT of `EpisodeUse` in the injection's transaction)
and, as the baseline, with `usage.record` replaced by a no-op in this process. The two are
interleaved question by question, so a change in machine load touches both alike.

    .venv/bin/python -m bench.inject_usage [--episodes 2000] [--queries 200]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import corpus, dataset, harness

TARGET = "inject median with usage counting ≤ 1.10 × without"
QUESTIONS = [
    "Where does Alice live?",
    "what food do I like?",
    "When is the next team meeting?",
    "Who is travelling next month?",
    "What did Bob say about the release?",
]


def run(n: int, queries: int, workdir: Path) -> harness.Record:
    harness.setup_django(workdir)
    from memconsole.memory import injection, reindex, usage
    from memconsole.memory.audit import Actor
    from memconsole.memory.usage_models import EpisodeUse

    harness.require_real_model()
    keys = dataset.scope_keys("group_usage")
    dataset.bulk_load(((keys, t) for t in corpus.texts(n)), n, say=lambda _m: None)
    reindex.reindex(check_only=False)
    harness.progress(f"{n:,} episodes loaded and indexed")
    actor = Actor.system("bench")
    counting = usage.record

    def skipping(*_args: object, **_kwargs: object) -> None:
        return None

    def with_usage(question: str) -> object:
        usage.record = counting
        return injection.record_injection(keys, actor, question, sender_id="u1", top_k=3)

    def without_usage(question: str) -> object:
        usage.record = skipping  # the baseline: the same inject, nothing counted
        try:
            return injection.record_injection(keys, actor, question, sender_id="u1", top_k=3)
        finally:
            usage.record = counting

    inputs = [QUESTIONS[i % len(QUESTIONS)] for i in range(queries)]
    with harness.measuring() as measured:
        timings = harness.interleaved({"with": with_usage, "without": without_usage}, inputs)
    counted = EpisodeUse.objects.count()
    if not counted:
        raise SystemExit("bench: no use was counted; the benchmark measured nothing")
    with_ms, without_ms = timings["with"].median_ms, timings["without"].median_ms
    ratio = harness.ratio(with_ms, without_ms)
    harness.progress(f"inject median: {with_ms:.2f} ms with usage, {without_ms:.2f} ms without ({counted} uses)")
    return harness.Record(
        name="inject.usage_counting",
        figures={
            "episodes": n,
            "injections_each": queries,
            "median_ms": round(with_ms, 2),
            "p95_ms": round(timings["with"].p95_ms, 2),
            "uses_counted": counted,
            "other_cpu_share": measured.share,
        },
        baseline={
            "name": "the same inject with usage.record a no-op (nothing counted)",
            "figures": {"median_ms": round(without_ms, 2), "p95_ms": round(timings["without"].p95_ms, 2)},
            "ratio_of": "median with counting / median without",
        },
        ratio=ratio,
        target=TARGET,
        met=ratio is not None and ratio <= 1.10,
    )


def main() -> None:
    args = harness.arguments(
        "inject with and without usage counting",
        episodes=2000,
        extra=lambda p: p.add_argument("--queries", type=int, default=200, help="injections per variant"),
    )
    with harness.workspace(args.keep) as workdir:
        harness.report(run(args.episodes, args.queries, workdir))


if __name__ == "__main__":
    main()
