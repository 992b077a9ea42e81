"""Benchmark: many spaces (issue 22's "ten thousand spaces"), one Chroma collection per space.

N vectors (default 20,000 = 200 spaces; the issue's size is `--episodes 1000000`, 10,000 spaces of
100 episodes) written through memconsole's own vector store, `memconsole.lib.vectors.upsert`: one
collection per user_key, named, created and labelled as the app does, each vector carrying the
metadata `sync.vector_metadata` gives it. The vectors are SYNTHETIC: seeded random unit vectors of
the model's dimension (384). This measures the store's layout, not the model.

A fresh worker process (a new interpreter, as after a restart) then opens the persisted store and
measures, through `vectors.query` with the app's recall query (30 nearest, distances only):

- time to first answer: from the worker's spawn to its first query's answer (imports, Django,
  client, the first collection loaded);
- cold recall: the first query to each space since the process started, every space once in a
  random order (so the worker has touched every space at the end);
- process RSS after the start, after 10% of the spaces and after all of them;
- warm recall: spaces already queried, queried again;
- recall@10 against exact cosine over the space's own vectors (a sanity check of the index).

Baseline, same run, same vectors and metadata: the alternative layout the issue names, ONE
collection holding every space's vectors, queried with `where={"user_key": ...}`, measured by its
own fresh worker (first answer, cold, warm, RSS), and timed side by side with the per-space search
in the first worker (the warm ratio). Reindex: a full rebuild of one space in the store
(`vectors.drop` + `vectors.upsert` of its 100 vectors), against deleting and re-adding the space's
vectors in the single collection, with an estimate for every space (plus embedding 100 texts with
the real model when it is installed). `--backend server` repeats everything against a Chroma server
(`chroma run`), whose RSS is then the server's.

    .venv/bin/python -m bench.spaces [--episodes 1000000] [--backend embedded|server|all]
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench import harness

PER_SPACE = 100
DIMENSIONS = 384
N_RESULTS = 30  # what recall asks the index for at top_k 10 (retrieval: fetch = max(10, 3 * top_k))
MODEL_ID = "bench-synthetic-unit-vectors-384"
SINGLE_COLLECTION = "bench_spaces_one_collection"
SEED = 22
WARM_SPACES = 50
WARM_QUERIES = 400
REBUILD_SAMPLES = 10
QUALITY_SPACES = 50
TARGETS = {"warm_median_ms": 10.0, "cold_median_ms": 40.0, "rss_mb": 1536.0, "first_answer_s": 10.0}
STATUSES = ("active", "active", "active", "active", "archived", "superseded")


# --- the data -----------------------------------------------------------------------------------


def user_key(space: int) -> str:
    from bench import dataset

    return dataset.scope_keys(f"space{space:05d}").user_key


def space_vectors(space: int) -> np.ndarray:
    """The space's 100 unit vectors, the same in every process (seeded by the space's number)."""
    rows = np.random.default_rng((SEED, space)).standard_normal((PER_SPACE, DIMENSIONS)).astype(np.float32)
    return np.asarray(rows / np.linalg.norm(rows, axis=1, keepdims=True), dtype=np.float32)


def query_vector(space: int, draw: int) -> np.ndarray:
    """A query near one of the space's vectors (as a question is near the episodes it is about)."""
    rng = np.random.default_rng((SEED, space, draw, 1))
    base = space_vectors(space)[int(rng.integers(PER_SPACE))]
    vector = base + 0.6 * rng.standard_normal(DIMENSIONS).astype(np.float32) / np.sqrt(DIMENSIONS)
    return np.asarray(vector / np.linalg.norm(vector), dtype=np.float32)


def space_ids(space: int) -> list[str]:
    return [f"{space * PER_SPACE + j:032x}" for j in range(PER_SPACE)]


def space_metadata(space: int, key: str) -> list[dict[str, Any]]:
    """The keys `sync.vector_metadata` writes for an unencrypted episode."""
    rng = random.Random(space)
    base = 1_700_000_000.0 + space
    return [
        {
            "user_key": key,
            "status": rng.choice(STATUSES),
            "sender_id": f"user{rng.randrange(8)}",
            "importance": rng.randrange(1, 6),
            "timestamp": base + j * 60.0,
            "tags": rng.choice(("", "work", "family,food", "travel")),
        }
        for j in range(PER_SPACE)
    ]


def load_spaces(spaces: int) -> dict[str, float]:
    """Every space through `vectors.upsert` (its collection created on the first write)."""
    from memconsole.lib import vectors

    with harness.stopwatch() as elapsed:
        for space in range(spaces):
            key = user_key(space)
            vectors.upsert(key, MODEL_ID, space_ids(space), space_vectors(space), space_metadata(space, key))
            if (space + 1) % max(1, spaces // 10) == 0:
                harness.progress(f"{space + 1:,} of {spaces:,} spaces written ({elapsed():.0f} s)")
    seconds = elapsed()
    return {"load_s": round(seconds, 1), "load_per_space_ms": round(seconds * 1000 / spaces, 2)}


def load_single(spaces: int) -> dict[str, float]:
    """The baseline layout: every space's vectors in one collection, the space in metadata."""
    from memconsole.lib import vectors

    client = vectors.get_client()
    collection = client.get_or_create_collection(
        SINGLE_COLLECTION, embedding_function=None, configuration={"hnsw": {"space": vectors.SPACE}}
    )
    per_batch = max(1, min(5000, client.get_max_batch_size()) // PER_SPACE)
    with harness.stopwatch() as elapsed:
        for start in range(0, spaces, per_batch):
            chunk = range(start, min(spaces, start + per_batch))
            keys = [user_key(s) for s in chunk]
            collection.add(
                ids=[i for s in chunk for i in space_ids(s)],
                embeddings=np.concatenate([space_vectors(s) for s in chunk]),
                metadatas=[m for s, k in zip(chunk, keys, strict=True) for m in space_metadata(s, k)],
            )
            if (start // per_batch + 1) % max(1, spaces // per_batch // 10) == 0:
                harness.progress(f"{chunk.stop:,} of {spaces:,} spaces in the single collection ({elapsed():.0f} s)")
    seconds = elapsed()
    return {"load_s": round(seconds, 1), "load_per_space_ms": round(seconds * 1000 / spaces, 2)}


# --- the fresh worker ---------------------------------------------------------------------------


def rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def exact_top(space: int, query: np.ndarray, k: int) -> list[str]:
    sims = space_vectors(space) @ query
    ids = space_ids(space)
    return [ids[i] for i in np.argsort(-sims)[:k]]


def worker(options: dict[str, Any]) -> dict[str, Any]:
    """Runs in a new interpreter: open the persisted store, answer, then sweep every space."""
    spawned_at = float(options["spawned_at"])
    harness.setup_django(
        Path(options["workdir"]), chroma_host=options["chroma_host"], chroma_port=options["chroma_port"], migrate=False
    )
    from memconsole.lib import vectors

    layout, spaces = options["layout"], int(options["spaces"])
    server_pid = options.get("server_pid")
    order = list(range(spaces))
    random.Random(SEED).shuffle(order)
    keys = {s: user_key(s) for s in order}
    single: Any = None

    def search(space: int, draw: int, other_layout: bool = False) -> list[str]:
        nonlocal single
        vector = query_vector(space, draw)
        if (layout == "single") != other_layout:
            if single is None:
                single = vectors.get_client().get_collection(SINGLE_COLLECTION, embedding_function=None)
            result = single.query(
                query_embeddings=vector.reshape(1, -1),
                n_results=N_RESULTS,
                where={"user_key": keys[space]},
                include=["distances"],
            )
            return list(result["ids"][0])
        return [hit.episode_id for hit in vectors.query(keys[space], MODEL_ID, vector, N_RESULTS)]

    out: dict[str, Any] = {"rss_before_open_mb": rss_mb()}
    first = order[0]
    start = time.perf_counter()
    found = search(first, 0)
    # Embedded Chroma keeps this many HNSW indexes in memory (a fifth of the open-file limit, which
    # lib/chromacache.py raises to the hard limit); beyond them a space is evicted. None: a server.
    out["hnsw_cache_indexes"] = getattr(getattr(vectors.get_client(), "_server", None), "hnsw_cache_size", None)
    out["first_query_ms"] = round((time.perf_counter() - start) * 1000, 1)
    out["first_answer_s"] = round(time.time() - spawned_at, 2)
    if len(found) != min(N_RESULTS, PER_SPACE):
        raise SystemExit(f"bench: the first query found {len(found)} vectors, not {N_RESULTS}")
    out["rss_after_first_answer_mb"] = rss_mb()

    with harness.measuring() as measured:
        cold: list[float] = []
        for position, space in enumerate(order[1:], start=1):
            start = time.perf_counter()
            search(space, 0)
            cold.append(time.perf_counter() - start)
            if position == max(1, spaces // 10):
                out["rss_after_10pct_mb"] = rss_mb()
                if server_pid:
                    out["server_rss_after_10pct_mb"] = rss_mb(server_pid)
        out["rss_after_all_mb"] = rss_mb()
        if server_pid:
            out["server_rss_after_all_mb"] = rss_mb(server_pid)
        out["cold"] = harness.Timing(cold).summary() if cold else {}

        # Warm: the most recently touched spaces (well within Chroma's cache), asked again.
        recent = order[-min(WARM_SPACES, spaces) :]
        draws = [(recent[i % len(recent)], 1 + i) for i in range(WARM_QUERIES)]
        methods: dict[str, Callable[..., object]] = {"ours": lambda x: search(x[0], x[1])}
        if options.get("beside"):  # the other layout, timed side by side (the ratio)
            methods["other"] = lambda x: search(x[0], x[1], other_layout=True)
        warm = harness.interleaved(methods, draws)
        out["warm"] = {name: timing.summary() for name, timing in warm.items()}
    out["rss_end_mb"] = rss_mb()
    out["other_cpu_share"] = measured.share

    quality = []
    for space in order[: min(QUALITY_SPACES, spaces)]:
        vector_draw = 7
        truth = exact_top(space, query_vector(space, vector_draw), 10)
        got = search(space, vector_draw)[:10]
        quality.append(len(set(truth) & set(got)) / 10)
    out["recall_at_10"] = round(float(np.mean(quality)), 4)
    return out


def run_worker(
    workdir: Path, layout: str, spaces: int, chroma: tuple[str, int], server_pid: int | None, beside: bool
) -> dict[str, Any]:
    options = {
        "workdir": str(workdir),
        "layout": layout,
        "spaces": spaces,
        "chroma_host": chroma[0],
        "chroma_port": chroma[1],
        "server_pid": server_pid,
        "beside": beside,
        "spawned_at": time.time(),
    }
    with harness.measuring() as measured:
        done = subprocess.run(
            [sys.executable, "-m", "bench.spaces", "--worker", json.dumps(options)],
            cwd=harness.ROOT,
            env={**os.environ, "PYTHONPATH": str(harness.ROOT), "BENCH_WAIT_QUIET": ""},
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"bench: the {layout} worker failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["worker_other_cpu_share"] = measured.share
    return result


# --- reindex ------------------------------------------------------------------------------------


def rebuild_times(spaces: int) -> dict[str, float]:
    """A full rebuild of one space in each layout, the store's part (the vectors are known)."""
    from memconsole.lib import vectors

    sample = random.Random(SEED + 1).sample(range(spaces), min(REBUILD_SAMPLES, spaces))
    single = vectors.get_client().get_collection(SINGLE_COLLECTION, embedding_function=None)

    def ours(space: int) -> None:
        key = user_key(space)
        vectors.drop(key)
        vectors.upsert(key, MODEL_ID, space_ids(space), space_vectors(space), space_metadata(space, key))

    def one_collection(space: int) -> None:
        key = user_key(space)
        single.delete(where={"user_key": key})
        single.add(ids=space_ids(space), embeddings=space_vectors(space), metadatas=space_metadata(space, key))

    timed = harness.interleaved({"ours": ours, "single": one_collection}, sample, warmup=0)
    with harness.stopwatch() as elapsed:
        names = vectors.list_collections()
    if len(names) < spaces:
        raise SystemExit(f"bench: {len(names):,} collections listed after the rebuilds, expected {spaces:,}")
    return {
        "ours_ms": round(timed["ours"].median_ms, 1),
        "single_ms": round(timed["single"].median_ms, 1),
        "list_collections_ms": round(elapsed() * 1000, 1),
    }


def embed_hundred_ms() -> float | None:
    """Embedding one space's 100 texts with the real model (None when it is not installed)."""
    from bench import corpus
    from memconsole.lib import embeddings

    if embeddings.get_embedder().is_fallback:
        return None
    texts = [t.content for t in corpus.texts(PER_SPACE)]
    embeddings.embed(texts[:16])
    return round(harness.measure(lambda: embeddings.embed(texts), repeat=3, warmup=0).median_ms, 1)


# --- the records --------------------------------------------------------------------------------


def measure_backend(backend: str, spaces: int, workdir: Path) -> list[harness.Record]:
    from django.conf import settings

    from bench.api_load import HOST, start_chroma, stop
    from memconsole.lib import vectors

    server = None
    chroma: tuple[str, int] = ("", 0)
    if backend == "server":
        server, port = start_chroma(workdir)
        chroma = (HOST, port)
        settings.CHROMA_HOST, settings.CHROMA_PORT, settings.CHROMA_SSL = HOST, port, False
    else:
        settings.CHROMA_HOST = ""
    vectors.reset_client()
    try:
        harness.progress(f"{backend}: writing {spaces:,} spaces of {PER_SPACE} synthetic vectors")
        ours_load = load_spaces(spaces)
        vectors.reset_client()
        if server is not None:  # the server's memory after loading is not what a restarted one holds
            stop(server)
            server, port = start_chroma(workdir)
            chroma = (HOST, port)
            settings.CHROMA_PORT = port  # this process loads the single collection next
        harness.progress(f"{backend}: fresh worker, per-space collections (cold sweep of every space)")
        ours = run_worker(workdir, "per_space", spaces, chroma, server.pid if server else None, beside=False)
        harness.progress(f"{backend}: per-space worker: {json.dumps(ours)}")
        harness.progress(f"{backend}: the same vectors into one collection")
        single_load = load_single(spaces)
        harness.progress(f"{backend}: single collection written: {json.dumps(single_load)}")
        harness.progress(f"{backend}: rebuilding {REBUILD_SAMPLES} spaces in each layout")
        rebuild = rebuild_times(spaces)
        embed_ms = embed_hundred_ms()
        harness.progress(f"{backend}: rebuild: {json.dumps(rebuild)}, embedding 100 texts {embed_ms} ms")
        vectors.reset_client()
        if server is not None:
            stop(server)
            server, port = start_chroma(workdir)
            chroma = (HOST, port)
        harness.progress(f"{backend}: fresh worker, one collection with where={{user_key}}, per-space beside it")
        base = run_worker(workdir, "single", spaces, chroma, server.pid if server else None, beside=True)
        harness.progress(f"{backend}: single-collection worker: {json.dumps(base)}")
    finally:
        if server is not None:
            stop(server)
        vectors.reset_client()
    return records(backend, spaces, ours_load, single_load, rebuild, embed_ms, ours, base)


def _rss(result: dict[str, Any], backend: str) -> float:
    """The memory a worker holds: its own RSS, and the server's too when the vectors live there."""
    own = float(result["rss_after_all_mb"])
    return own + float(result.get("server_rss_after_all_mb", 0.0)) if backend == "server" else own


def records(
    backend: str,
    spaces: int,
    ours_load: dict[str, float],
    single_load: dict[str, float],
    rebuild: dict[str, float],
    embed_ms: float | None,
    ours: dict[str, Any],
    base: dict[str, Any],
) -> list[harness.Record]:
    vectors_total = spaces * PER_SPACE
    warm, cold = ours["warm"]["ours"], ours["cold"]
    beside, single_beside = base["warm"]["other"], base["warm"]["ours"]  # timed side by side
    share = max(x for x in (ours["other_cpu_share"], base["other_cpu_share"], 0.0) if x is not None)
    synthetic = "vectors are synthetic (seeded random unit vectors, 384 dimensions): this measures the store layout"
    common = {"backend": backend, "spaces": spaces, "vectors": vectors_total}
    recall = harness.Record(
        name=f"spaces.{backend}.recall",
        figures={
            **common,
            "warm_median_ms": warm["median_ms"],
            "warm_p95_ms": warm["p95_ms"],
            "cold_median_ms": cold.get("median_ms"),
            "cold_p95_ms": cold.get("p95_ms"),
            "cold_queries": cold.get("n"),
            "recall_at_10": ours["recall_at_10"],
            "warm_beside_single_median_ms": beside["median_ms"],
            "other_cpu_share": share,
        },
        baseline={
            "name": "one collection for every space, where={user_key} (own fresh worker)",
            "figures": {
                "warm_median_ms": base["warm"]["ours"]["median_ms"],
                "warm_p95_ms": base["warm"]["ours"]["p95_ms"],
                "cold_median_ms": base["cold"].get("median_ms"),
                "cold_p95_ms": base["cold"].get("p95_ms"),
                "cold_queries": base["cold"].get("n"),
                "recall_at_10": base["recall_at_10"],
            },
            "ratio_of": "one-collection where= median / per-space median, warm, timed side by side in one worker "
            f"({single_beside['median_ms']:.2f} / {beside['median_ms']:.2f} ms)",
        },
        ratio=harness.ratio(single_beside["median_ms"], beside["median_ms"]),
        target=f"warm median <= {TARGETS['warm_median_ms']:g} ms, cold median <= {TARGETS['cold_median_ms']:g} ms",
        met=warm["median_ms"] <= TARGETS["warm_median_ms"]
        and (cold.get("median_ms") or 0) <= TARGETS["cold_median_ms"],
        notes=[synthetic, "cold = the first query to each space since the worker started, every space once"],
    )
    rss = _rss(ours, backend)
    startup = harness.Record(
        name=f"spaces.{backend}.startup_memory",
        figures={
            **common,
            "first_answer_s": ours["first_answer_s"],
            "first_query_ms": ours["first_query_ms"],
            "worker_rss_after_first_answer_mb": ours["rss_after_first_answer_mb"],
            "worker_rss_after_10pct_spaces_mb": ours.get("rss_after_10pct_mb"),
            "worker_rss_after_all_spaces_mb": ours["rss_after_all_mb"],
            "hnsw_cache_indexes": ours["hnsw_cache_indexes"] if backend == "embedded" else None,
            "server_rss_after_all_spaces_mb": ours.get("server_rss_after_all_mb"),
            "load_s": ours_load["load_s"],
            "load_per_space_ms": ours_load["load_per_space_ms"],
            "other_cpu_share": share,
        },
        baseline={
            "name": "one collection for every space, where={user_key} (own fresh worker)",
            "figures": {
                "first_answer_s": base["first_answer_s"],
                "first_query_ms": base["first_query_ms"],
                "worker_rss_after_first_answer_mb": base["rss_after_first_answer_mb"],
                "worker_rss_after_10pct_spaces_mb": base.get("rss_after_10pct_mb"),
                "worker_rss_after_all_spaces_mb": base["rss_after_all_mb"],
                "server_rss_after_all_spaces_mb": base.get("server_rss_after_all_mb"),
                "load_s": single_load["load_s"],
                "load_per_space_ms": single_load["load_per_space_ms"],
            },
            "ratio_of": "one-collection RSS / per-space RSS after touching every space"
            + (" (worker + server)" if backend == "server" else ""),
        },
        ratio=harness.ratio(_rss(base, backend), rss),
        target=f"RSS <= {TARGETS['rss_mb']:g} MB after every space was queried, first answer <= "
        f"{TARGETS['first_answer_s']:g} s",
        met=rss <= TARGETS["rss_mb"] and ours["first_answer_s"] <= TARGETS["first_answer_s"],
        notes=[synthetic, "RSS excludes the embedding model (a worker adds ~100-200 MB for it)"],
    )
    per_space_s = (rebuild["ours_ms"] + (embed_ms or 0.0)) / 1000
    reindex = harness.Record(
        name=f"spaces.{backend}.reindex",
        figures={
            **common,
            "rebuild_one_space_store_ms": rebuild["ours_ms"],
            "embed_100_texts_ms": embed_ms,
            "rebuild_all_estimate_s": round(per_space_s * spaces, 1),
            "list_collections_ms": rebuild["list_collections_ms"],
            "other_cpu_share": share,
        },
        baseline={
            "name": "one collection: delete where={user_key} + add the space's 100 vectors",
            "figures": {
                "rebuild_one_space_store_ms": rebuild["single_ms"],
                "rebuild_all_estimate_s": round((rebuild["single_ms"] + (embed_ms or 0.0)) / 1000 * spaces, 1),
            },
            "ratio_of": "one-collection rebuild / per-space rebuild of one space (store only, side by side)",
        },
        ratio=harness.ratio(rebuild["single_ms"], rebuild["ours_ms"]),
        target="none in issue 22 (reported): estimate = spaces x (store rebuild + embedding 100 texts)",
        met=None,
        notes=[synthetic],
    )
    return [recall, startup, reindex]


def run(n: int, backends: list[str], workdir: Path) -> list[harness.Record]:
    harness.setup_django(workdir)
    spaces = max(1, n // PER_SPACE)
    print(
        f"{spaces:,} spaces of {PER_SPACE} synthetic vectors ({spaces * PER_SPACE:,}); backends: {', '.join(backends)}"
    )
    out: list[harness.Record] = []
    for backend in backends:
        backend_dir = workdir / backend
        backend_dir.mkdir(parents=True, exist_ok=True)
        from django.conf import settings

        settings.CHROMA_PATH = backend_dir / "chroma"
        out.extend(harness.report(record) for record in measure_backend(backend, spaces, backend_dir))
    return out


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        print(json.dumps(worker(json.loads(sys.argv[2]))), flush=True)
        return
    args = harness.arguments(
        "Many spaces: one Chroma collection per space vs one collection filtered by user_key",
        episodes=PER_SPACE * 200,
        extra=lambda p: p.add_argument(
            "--backend", choices=["embedded", "server", "all"], default="all", help="Chroma embedded, server or both"
        ),
    )
    backends = ["embedded", "server"] if args.backend == "all" else [args.backend]
    with harness.workspace(args.keep) as workdir:
        run(args.episodes, backends, workdir)


if __name__ == "__main__":
    main()
