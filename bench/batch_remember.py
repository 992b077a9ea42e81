"""Benchmark: batch remember of 256 episodes against the embedding-only floor (issue 22).

`batch_remember.remember_many` of 256 episodes in one scope (validation, one embedding call, one
transaction with every row, lexical entry, audit entry and counter, one Chroma upsert, supersede
checks for the corrections among them) against the floor no write path can beat: embedding the
same 256 texts in one model call, with no database and no index. Both are timed interleaved, batch
after batch on fresh texts, so both meet the same machine load. The scope already holds
`--episodes` episodes (written by earlier batches), so the supersede searches have an index to
search. Embedding and upserting alone (no database) is reported beside them.

Target (issue 22): batch remember ≥ 0.8× the embedding-only floor in episodes/s.

    .venv/bin/python -m bench.batch_remember [--episodes 2048] [--batches 8]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import corpus, dataset, harness

BATCH = 256
TARGET_RATIO = 0.8


def run(prefill: int, batches: int, workdir: Path) -> harness.Record:
    harness.setup_django(workdir)
    from memconsole.lib import embeddings, vectors
    from memconsole.memory import batch_remember
    from memconsole.memory.audit import Actor

    model_id = harness.require_real_model()
    actor = Actor.system("bench")
    keys = dataset.scope_keys("group_batch")
    prefill_batches = max(1, prefill // BATCH)
    texts = list(corpus.texts(BATCH * (prefill_batches + 1 + batches)))
    groups = [texts[i : i + BATCH] for i in range(0, len(texts), BATCH)]
    items: list[list[dict[str, Any]]] = [
        [
            {
                "content": t.content,
                "tags": t.tags,
                "importance": t.importance,
                "sender_id": t.speaker.sender_id,
                "sender_name": t.speaker.name,
            }
            for t in group
        ]
        for group in groups
    ]
    corrections = sum(1 for t in texts if "correction" in t.tags)
    harness.progress(f"{len(texts):,} texts, {corrections} of them corrections (supersede checks)")
    for group in items[:prefill_batches]:  # the scope's earlier memory (and the model warmed up)
        batch_remember.remember_many(keys, actor, group)
    harness.progress(f"scope holds {prefill_batches * BATCH:,} episodes")

    def batch(position: int) -> None:
        result = batch_remember.remember_many(keys, actor, items[position])
        if not result.indexed or len(result.results) != BATCH:
            raise SystemExit("bench: remember_many did not store and index its batch")

    def embed_only(position: int) -> None:
        embeddings.embed([item["content"] for item in items[position]])

    bare_key = "bench:bare"

    def embed_and_upsert(position: int) -> None:
        group = items[position]
        vectors_ = embeddings.embed([item["content"] for item in group])
        ids = [f"{position:04x}{i:08x}" for i in range(len(group))]
        vectors.upsert(bare_key, model_id, ids, vectors_, [{"user_key": bare_key, "status": "active"}] * len(group))

    positions = list(range(prefill_batches, prefill_batches + 1 + batches))
    with harness.measuring() as measured:
        timings = harness.interleaved(
            {"batch": batch, "embed": embed_only, "embed_upsert": embed_and_upsert}, positions, warmup=1
        )
    rates = {name: BATCH * len(t.samples) / sum(t.samples) for name, t in timings.items()}
    harness.progress(
        f"remember_many: {rates['batch']:.0f} episodes/s; embedding only: {rates['embed']:.0f}/s; "
        f"embedding + upsert: {rates['embed_upsert']:.0f}/s"
    )
    ratio = harness.ratio(rates["batch"], rates["embed"])
    return harness.Record(
        name="batch_remember.256",
        figures={
            "batch": BATCH,
            "batches": batches,
            "episodes_per_s": round(rates["batch"], 1),
            "median_ms": round(timings["batch"].median_ms, 1),
            "p95_ms": round(timings["batch"].p95_ms, 1),
            "embed_and_upsert_per_s": round(rates["embed_upsert"], 1),
            "scope_episodes_before": prefill_batches * BATCH,
            "other_cpu_share": measured.share,
        },
        baseline={
            "name": "embedding the same 256 texts in one call (no database, no index)",
            "figures": {
                "episodes_per_s": round(rates["embed"], 1),
                "median_ms": round(timings["embed"].median_ms, 1),
            },
            "ratio_of": "remember_many episodes/s / embedding-only texts/s",
        },
        ratio=ratio,
        target=f">= {TARGET_RATIO:g}x the embedding-only floor in episodes/s",
        met=bool(ratio is not None and ratio >= TARGET_RATIO),
    )


def main() -> None:
    args = harness.arguments(
        "Batch remember of 256 episodes vs the embedding-only floor",
        episodes=2048,
        extra=lambda p: p.add_argument("--batches", type=int, default=8, help="timed batches (default 8)"),
    )
    with harness.workspace(args.keep) as workdir:
        harness.report(run(args.episodes, args.batches, workdir))


if __name__ == "__main__":
    main()
