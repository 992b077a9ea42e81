"""Benchmark 3: embedding throughput, memconsole's embedder vs chromadb's ONNXMiniLM_L6_V2.

Both run the same model files (chromadb's embedding function is pointed at a temporary folder
whose `onnx` entry links to our model folder, so it never downloads). memconsole sorts texts by
length and pads each batch to its longest text; chromadb pads every text to 256 tokens.

    .venv/bin/python -m bench.embedding [--texts 2000] [--full-baseline]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench import corpus, harness

if TYPE_CHECKING:
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

CHROMA_FILES = (
    "config.json",
    "model.onnx",
    "special_tokens_map.json",
    "tokenizer_config.json",
    "tokenizer.json",
    "vocab.txt",
)
TARGET_RATIO = 10.0
TARGET_COSINE = 1e-4


def chroma_embedder(model_dir: Path, folder: Path) -> ONNXMiniLM_L6_V2:
    """chromadb's own embedding function reading `model_dir` (refuses to download anything)."""
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    missing = [name for name in CHROMA_FILES if not (model_dir / name).is_file()]
    if missing:
        raise SystemExit(f"bench: {model_dir} lacks {', '.join(missing)}, which chromadb's embedder needs")
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / ONNXMiniLM_L6_V2.EXTRACTED_FOLDER_NAME
    if not link.exists():
        link.symlink_to(model_dir.resolve(), target_is_directory=True)
    function = ONNXMiniLM_L6_V2(preferred_providers=["CPUExecutionProvider"])
    function.DOWNLOAD_PATH = folder

    def no_download(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("the benchmark never downloads a model")

    # chromadb has no switch to stop it downloading a missing model: replace its private downloader.
    function._download = no_download  # type: ignore[assignment]  # noqa: SLF001
    return function


def run(texts_count: int, workdir: Path, baseline_sample: int) -> harness.Record:
    harness.setup_django(workdir, migrate=False)
    from memconsole.lib import embeddings

    harness.require_real_model()
    embedder = embeddings.get_embedder()
    assert isinstance(embedder, embeddings.OnnxEmbedder)  # require_real_model() exits on the fallback
    texts = [t.content for t in corpus.texts(texts_count)]
    tokens = [len(e.ids) for e in embedder.tokenizer.encode_batch(texts)]
    harness.progress(f"{len(texts):,} texts, {np.mean(tokens):.1f} tokens on average (max {max(tokens)})")

    # chromadb pads every text to 256 tokens, so its cost per text does not depend on the text: an
    # evenly spread sample measures its rate as well as the whole set, in a fraction of the time.
    step = max(1, len(texts) // baseline_sample) if baseline_sample else 1
    positions = list(range(0, len(texts), step))
    theirs_fn = chroma_embedder(harness.model_dir(), workdir / "chroma-onnx")
    embedder.embed(texts[:64])  # warm both sessions up
    theirs_fn(texts[:32])

    # Interleaved rounds (ours on a quarter of the texts, then chromadb on its share of the sample)
    # so that both sides meet the same machine load, should it change during the run.
    rounds = 4
    ours = np.empty((len(texts), embeddings.DIMENSIONS), dtype=np.float32)
    theirs_parts = []
    ours_seconds = theirs_seconds = 0.0
    with harness.measuring() as measured:
        for r in range(rounds):
            lo, hi = len(texts) * r // rounds, len(texts) * (r + 1) // rounds
            with harness.stopwatch() as elapsed:
                ours[lo:hi] = embedder.embed(texts[lo:hi])
            ours_seconds += elapsed()
            chunk = [texts[i] for i in positions if lo <= i < hi]
            with harness.stopwatch() as elapsed:
                theirs_parts.append(np.asarray(theirs_fn(chunk), dtype=np.float32))
            theirs_seconds += elapsed()
    theirs = np.concatenate(theirs_parts)
    sample = [texts[i] for i in positions]
    harness.progress(f"memconsole: {ours_seconds:.2f} s for {len(texts):,} texts")
    harness.progress(f"chromadb: {theirs_seconds:.2f} s for {len(sample):,} texts")

    mine = ours[positions]
    cosine_distance = 1.0 - np.sum(mine * theirs, axis=1) / (
        np.linalg.norm(mine, axis=1) * np.linalg.norm(theirs, axis=1)
    )
    worst = float(np.max(cosine_distance))
    ours_rate = len(texts) / ours_seconds
    theirs_rate = len(sample) / theirs_seconds
    speedup = harness.ratio(ours_rate, theirs_rate)
    return harness.Record(
        name="embedding.throughput",
        figures={
            "texts": len(texts),
            "mean_tokens": round(float(np.mean(tokens)), 1),
            "seconds": round(ours_seconds, 3),
            "texts_per_s": round(ours_rate, 1),
            "max_cosine_distance": float(f"{worst:.2e}"),
            "other_cpu_share": measured.share,
        },
        baseline={
            "name": "chromadb ONNXMiniLM_L6_V2, same model files",
            "figures": {
                "texts": len(sample),
                "seconds": round(theirs_seconds, 3),
                "texts_per_s": round(theirs_rate, 1),
            },
            "ratio_of": "memconsole texts/s / chromadb texts/s",
        },
        ratio=speedup,
        target=f">= {TARGET_RATIO:g}x chromadb's throughput, vectors within {TARGET_COSINE:g} cosine",
        met=bool(speedup is not None and speedup >= TARGET_RATIO and worst <= TARGET_COSINE),
    )


def main() -> None:
    args = harness.arguments(
        "Embedding throughput vs chromadb's ONNXMiniLM_L6_V2",
        episodes=2000,
        extra=_options,
    )
    sample = 0 if args.full_baseline else args.baseline_sample
    with harness.workspace(args.keep) as workdir:
        harness.report(run(args.texts or args.episodes, workdir, sample))


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--texts", type=int, default=None, help="number of texts (default: --episodes, 2,000)")
    parser.add_argument(
        "--baseline-sample", type=int, default=500, help="texts chromadb embeds (an even sample; default 500)"
    )
    parser.add_argument("--full-baseline", action="store_true", help="chromadb embeds every text (slow)")


if __name__ == "__main__":
    main()
