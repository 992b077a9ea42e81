"""An erasure's rewrite of other people's injection snapshots: what the person contributed to a
prompt (their episodes, their window messages, their id among the speakers a question named) is
taken out, and the memory block rendered again from what is left (`erasure.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .injection import MEMORIES_BLOCK, memory_block
from .models import InjectionSnapshot


def without_subject(payload: dict[str, Any], sender_id: str, episode_ids: set[str]) -> dict[str, Any] | None:
    """The snapshot payload without the person (their episodes in the injected list, the rendered
    block and the retrieval trace's candidates; their messages in the window's history; their id
    among the speakers the question named), or None when they are not in it."""

    def theirs(item: Any) -> bool:
        return isinstance(item, dict) and (item.get("sender_id") == sender_id or item.get("episode_id") in episode_ids)

    episodes = payload.get("episodes") or []
    kept = [e for e in episodes if not theirs(e)]
    history = payload.get("history")
    kept_history = [m for m in history or [] if not theirs(m)]
    retrieval = payload.get("retrieval")
    retrieval = dict(retrieval) if isinstance(retrieval, dict) else None
    changed = len(kept) != len(episodes) or len(kept_history) != len(history or [])
    if retrieval is not None:
        candidates = retrieval.get("candidates") or []
        named = retrieval.get("named_speakers") or []
        retrieval["candidates"] = [c for c in candidates if not theirs(c)]
        retrieval["named_speakers"] = [s for s in named if s != sender_id]
        changed = (
            changed or len(retrieval["candidates"]) != len(candidates) or len(retrieval["named_speakers"]) != len(named)
        )
    if not changed:
        return None
    blocks = [b for b in payload.get("system_blocks") or [] if not str(b).startswith(MEMORIES_BLOCK)]
    if kept:
        blocks.append(memory_block(kept))
    rewritten = {**payload, "episodes": kept, "system_blocks": blocks}
    if history is not None:
        rewritten["history"] = kept_history
    if retrieval is not None:
        rewritten["retrieval"] = retrieval
    return rewritten


def snapshots_to_rewrite(
    sender_id: str, episode_ids: set[str], snapshots: Iterable[InjectionSnapshot]
) -> Iterator[tuple[InjectionSnapshot, dict[str, Any]]]:
    """(snapshot, new payload) for each of `snapshots` that holds the person's episodes."""
    for snapshot in snapshots:
        rewritten = without_subject(snapshot.payload, sender_id, episode_ids)
        if rewritten is not None:
            yield snapshot, rewritten
