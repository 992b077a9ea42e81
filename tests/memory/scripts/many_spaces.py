"""Write or search many spaces' vectors through `lib/vectors` in a fresh process
(tests/memory/test_chroma_cache.py). argv: write|search SPACES; CHROMA_PATH names the store.
Prints one JSON line: {"cache": Chroma's index cache size, "failed": [spaces whose search failed]}."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

import numpy as np  # noqa: E402

from memconsole.lib import vectors  # noqa: E402

MODEL = "test-model"


def main() -> None:
    role, spaces = sys.argv[1], int(sys.argv[2])
    failed = []
    for _sweep in range(1 if role == "write" else 2):  # searched twice: the first ones are evicted by then
        for space in range(spaces):
            key = f"bot:many-{space}"
            rows = np.random.default_rng(space).standard_normal((30, 384)).astype(np.float32)
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
            ids = [f"s{space}e{n}" for n in range(len(rows))]
            if role == "write":
                vectors.upsert(key, MODEL, ids, rows, [{"user_key": key, "status": "active"} for _ in ids])
                continue
            try:
                hits = vectors.query(key, MODEL, rows[7], 3)
            except vectors.VectorIndexError:
                failed.append(space)
                continue
            if hits[0].episode_id != f"s{space}e7":
                failed.append(space)
    cache = getattr(getattr(vectors.get_client(), "_server", None), "hnsw_cache_size", None)
    print(json.dumps({"cache": cache, "failed": sorted(set(failed))}))


if __name__ == "__main__":
    main()
