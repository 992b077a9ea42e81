"""Benchmark 6a: ingest through the domain operations, embedding included.

- `episodes.remember`, one episode a call as a bot sends them (validation, embedding, database
  row, audit-chain entry, counters, vector write), against the bare minimum a vector store needs
  for the same episode: embed it and upsert it into Chroma (no database, no audit);
- batched ingest, as an import does it: rows with `bulk_create`, then `sync.index_episodes`
  in batches of 256 (one embedding call and one Chroma upsert a batch), against `remember` one at
  a time.

There is no target for ingest in issue 7: the figures are reported, `met` is null.

    .venv/bin/python -m bench.ingest [--remember 500] [--episodes 5000]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import corpus, dataset, harness

BATCH = 256
NO_TARGET = "none in issue 7 (reported only)"


def run(remember_count: int, batched_count: int, workdir: Path) -> list[harness.Record]:
    harness.setup_django(workdir)
    from django.utils import timezone

    from memconsole.lib import embeddings, vectors
    from memconsole.memory import episodes, paging, sync
    from memconsole.memory.audit import Actor
    from memconsole.memory.models import Episode

    model_id = harness.require_real_model()
    actor = Actor.system("bench")
    texts = list(corpus.texts(remember_count + batched_count))
    remember_texts, batch_texts = texts[:remember_count], texts[remember_count:]
    keys = dataset.scope_keys("group_remember")
    embeddings.embed([t.content for t in texts[:64]])  # warm the model up

    def remember(text: corpus.Text) -> None:
        result = episodes.remember(
            keys,
            actor,
            text.content,
            tags=text.tags,
            importance=text.importance,
            sender_id=text.speaker.sender_id,
            sender_name=text.speaker.name,
        )
        if not result.indexed:
            raise SystemExit("bench: remember did not index its episode")

    bare_key = "bench:bare"
    counter = iter(range(10**9))

    def bare(text: corpus.Text) -> None:
        vector = embeddings.embed([text.content])
        episode_id = f"{next(counter):012x}"
        vectors.upsert(bare_key, model_id, [episode_id], vector, [{"user_key": bare_key, "status": "active"}])

    # Interleaved (remember text i, then bare text i) so that both meet the same machine load.
    with harness.measuring() as measured:
        timings = harness.interleaved({"remember": remember, "bare": bare}, remember_texts, warmup=0)
    ours, bare_t = timings["remember"], timings["bare"]
    remember_rate = remember_count / sum(ours.samples)
    bare_rate = remember_count / sum(bare_t.samples)
    harness.progress(f"remember: {remember_rate:.1f}/s; bare embed + upsert: {bare_rate:.1f}/s")

    records = [
        harness.Record(
            name="ingest.remember",
            figures={
                "episodes": remember_count,
                "per_s": round(remember_rate, 1),
                "median_ms": round(ours.median_ms, 2),
                "p95_ms": round(ours.p95_ms, 2),
                "other_cpu_share": measured.share,
            },
            baseline={
                "name": "bare embed + Chroma upsert per episode (no database row, no audit entry)",
                "figures": {
                    "episodes": remember_count,
                    "per_s": round(bare_rate, 1),
                    "median_ms": round(bare_t.median_ms, 2),
                    "p95_ms": round(bare_t.p95_ms, 2),
                },
                "ratio_of": "remember per second / bare per second (the cost of the source of truth and audit)",
            },
            ratio=harness.ratio(remember_rate, bare_rate),
            target=NO_TARGET,
            met=None,
        )
    ]

    # Batched: rows through bulk_create, vectors through index_episodes in batches.
    batch_keys = dataset.scope_keys("group_batched")
    now = timezone.now()
    with harness.measuring() as measured_batched, harness.stopwatch() as elapsed:
        dataset.bulk_load(
            ((batch_keys, t) for t in batch_texts), len(batch_texts), mixed_statuses=False, now=now, say=lambda _m: None
        )
        rows_s = elapsed()
        pending = Episode.objects.in_scope(batch_keys.user_key).filter(vector_current=False)
        batch: list[Episode] = []
        for row in paging.iter_in_batches(pending, 1000):
            batch.append(row)
            if len(batch) == BATCH:
                sync.index_episodes(batch)
                batch = []
        sync.index_episodes(batch)
        total_s = elapsed()
    batched_rate = batched_count / total_s
    harness.progress(f"batched: {batched_rate:.1f}/s ({rows_s:.1f} s rows, {total_s - rows_s:.1f} s embed + index)")
    records.append(
        harness.Record(
            name="ingest.batched",
            figures={
                "episodes": batched_count,
                "per_s": round(batched_rate, 1),
                "rows_s": round(rows_s, 2),
                "embed_and_index_s": round(total_s - rows_s, 2),
                "batch": BATCH,
                "other_cpu_share": measured_batched.share,
            },
            baseline={
                "name": "episodes.remember one episode at a time (above)",
                "figures": {"episodes": remember_count, "per_s": round(remember_rate, 1)},
                "ratio_of": "batched per second / remember per second",
            },
            ratio=harness.ratio(batched_rate, remember_rate),
            target=NO_TARGET,
            met=None,
        )
    )
    return records


def main() -> None:
    args = harness.arguments(
        "Ingest: remember one at a time and batched index_episodes",
        episodes=5000,
        extra=lambda p: p.add_argument("--remember", type=int, default=500, help="remember calls (default 500)"),
    )
    with harness.workspace(args.keep) as workdir:
        for record in run(args.remember, args.episodes, workdir):
            harness.report(record)


if __name__ == "__main__":
    main()
