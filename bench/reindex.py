"""Benchmark 6b: `reindex` throughput (memconsole.memory.reindex).

N episodes (default 3,000; the issue's size is 100,000) bulk-loaded over 10 scopes with no vectors
(as after a restore, a model change or a lost index folder), then `reindex(check_only=False)`
re-embeds and writes every vector. The baseline is the floor no reindex can beat: embedding the
same texts alone (`embeddings.embed`, batches of 256, measured on up to 2,000 of them). A second
pass, `reindex(check_only=True)` over the now-current index, measures the drift check.

    .venv/bin/python -m bench.reindex [--episodes 100000]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import corpus, dataset, harness

SCOPES = 10
BASELINE_TEXTS = 2000
NO_TARGET = "none in issue 7 (reported only); the check pass must find no drift"


def run(n: int, workdir: Path) -> harness.Record:
    harness.setup_django(workdir)
    from memconsole.lib import embeddings
    from memconsole.memory import reindex

    harness.require_real_model()
    scopes = [dataset.scope_keys(f"group_re{i:02d}") for i in range(SCOPES)]
    texts = list(corpus.texts(n))
    dataset.bulk_load(((scopes[i % SCOPES], t) for i, t in enumerate(texts)), n, say=lambda _m: None)
    harness.progress(f"{n:,} episodes loaded without vectors")

    with harness.measuring() as measured:
        sample = [t.content for t in texts[:BASELINE_TEXTS]]
        embeddings.embed(sample[:64])  # warm up
        with harness.stopwatch() as elapsed:
            for start in range(0, len(sample), 256):
                embeddings.embed(sample[start : start + 256])
        embed_rate = len(sample) / elapsed()
        harness.progress(f"embedding alone: {embed_rate:.0f}/s")

        with harness.stopwatch() as elapsed:
            repaired = reindex.reindex(check_only=False)
        repair_s = elapsed()
    if repaired.errors or repaired.reembedded != n:
        raise SystemExit(f"bench: reindex did not re-embed every episode: {repaired.summary()}")
    harness.progress(f"reindex: {repaired.summary()}")
    with harness.stopwatch() as elapsed:
        checked = reindex.reindex(check_only=True)
    check_s = elapsed()
    harness.progress(f"check: {checked.summary()}")
    rate = n / repair_s
    return harness.Record(
        name="reindex.throughput",
        figures={
            "episodes": n,
            "scopes": SCOPES,
            "seconds": round(repair_s, 1),
            "episodes_per_s": round(rate, 1),
            "check_seconds": round(check_s, 2),
            "check_episodes_per_s": round(n / check_s),
            "drift_after": checked.drift,
            "other_cpu_share": measured.share,
        },
        baseline={
            "name": "embedding alone, same texts, batches of 256 (the floor)",
            "figures": {"episodes": len(sample), "episodes_per_s": round(embed_rate, 1)},
            "ratio_of": "reindex episodes/s / embedding-only texts/s",
        },
        ratio=harness.ratio(rate, embed_rate),
        target=NO_TARGET,
        met=None if checked.drift == 0 else False,
    )


def main() -> None:
    args = harness.arguments("Reindex throughput", episodes=3000)
    with harness.workspace(args.keep) as workdir:
        harness.report(run(args.episodes, workdir))


if __name__ == "__main__":
    main()
