"""Bulk loading for the benchmarks: episodes straight through the ORM's bulk path, counters through
`counters.recount`, vectors through `sync.index_episodes`, embeddings cached between runs.

Call only after `harness.setup_django()`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bench import corpus, harness

if TYPE_CHECKING:
    from memconsole.memory.scopes import ScopeKeys

STATUS_WEIGHTS = (("active", 85), ("archived", 10), ("superseded", 5))
BOT = "bench-bot"


@dataclass(frozen=True)
class LoadedScope:
    keys: ScopeKeys
    count: int


def scope_keys(session_name: str, bot_uuid: str = BOT, isolation: str = "session") -> ScopeKeys:
    from memconsole.memory.scopes import derive_scope

    return derive_scope(bot_uuid, session_name, isolation)


def _status_picker(rng: random.Random) -> Callable[[], str]:
    names = [name for name, _ in STATUS_WEIGHTS]
    weights = [weight for _, weight in STATUS_WEIGHTS]
    return lambda: rng.choices(names, weights)[0]


def bulk_load(
    assignments: Iterable[tuple[ScopeKeys, corpus.Text]],
    total: int,
    *,
    seed: int = 7,
    batch: int = 5000,
    mixed_statuses: bool = True,
    now: datetime | None = None,
    say: Callable[[str], None] = harness.progress,
) -> int:
    """Insert one Episode per (keys, text) with Episode.objects.bulk_create, oldest first (ids rise
    with time, as they do in production), then register every scope and recount its counters."""
    from django.db import transaction
    from django.utils import timezone

    from memconsole.memory import counters, models
    from memconsole.memory.models import Episode
    from memconsole.memory.scopes import register_scope

    rng = random.Random(seed)
    pick_status = _status_picker(rng)
    now = now or timezone.now()
    start = now - timedelta(days=365)
    step = timedelta(days=365) / max(total, 1)
    seen: dict[str, ScopeKeys] = {}
    rows: list[Episode] = []
    written = 0

    def flush() -> None:
        nonlocal written
        if rows:
            with transaction.atomic():
                Episode.objects.bulk_create(rows, batch_size=1000)
            written += len(rows)
            rows.clear()
            if written % (batch * 20) == 0 or written == total:
                say(f"loaded {written:,}/{total:,} episodes")

    for position, (keys, text) in enumerate(assignments):
        seen.setdefault(keys.user_key, keys)
        when = start + step * position
        status = pick_status() if mixed_statuses else "active"
        episode = Episode(
            episode_id=f"{position:012x}",
            user_key=keys.user_key,
            scope_key=keys.scope_key,
            tags=text.tags,
            tags_text=models.tags_text(text.tags),
            importance=text.importance,
            timestamp=when,
            sender_id=text.speaker.sender_id,
            sender_name=text.speaker.name,
            bot_uuid=keys.bot_uuid,
            source="agent",
            status=status,
            superseded_by=f"{position + 1:012x}" if status == "superseded" else "",
            created_at=when,
            updated_at=when,
        )
        episode.set_content(text.content)
        rows.append(episode)
        if len(rows) >= batch:
            flush()
    flush()
    with transaction.atomic():
        for keys in seen.values():
            register_scope(keys)
            counters.recount(keys.user_key)
    return written


# --- embeddings ---------------------------------------------------------------------------------


def cache_path(model_id: str) -> Path:
    return harness.CACHE_DIR / f"embeddings-{corpus.CORPUS_VERSION}-{model_id}.npy"


def cached_embeddings(count: int, say: Callable[[str], None] = harness.progress, chunk: int = 2000) -> np.ndarray:
    """Vectors of the first `count` corpus texts, embedded with the real model once and cached in
    bench/results/cache/ (a longer cache serves any shorter run)."""
    from memconsole.lib import embeddings

    model_id = harness.require_real_model()
    path = cache_path(model_id)
    have = np.load(path) if path.exists() else np.zeros((0, embeddings.DIMENSIONS), dtype=np.float32)
    if len(have) >= count:
        say(f"embeddings: {count:,} from cache {path.name}")
        return np.ascontiguousarray(have[:count])
    texts = [t.content for t in corpus.texts(count)]
    parts = [have]
    done = len(have)
    say(f"embeddings: {done:,} cached, embedding {count - done:,} more with the real model (cached afterwards)")
    with harness.stopwatch() as elapsed:
        while done < count:
            part = embeddings.embed(texts[done : done + chunk])
            parts.append(part)
            done += len(part)
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, np.concatenate(parts))  # keep progress if interrupted
            rate = (done - len(have)) / max(elapsed(), 1e-9)
            say(f"embedded {done:,}/{count:,} ({rate:.0f}/s)")
    return np.ascontiguousarray(np.concatenate(parts)[:count])
