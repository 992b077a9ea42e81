"""Replay an injection (issue 18): run the snapshot's retrieval again against today's memory, and
say what changed and why: a memory added, dropped or moved, because it was edited, archived,
superseded, deleted or restored since, because it is new, or because the ranking moved (other
memories scored higher, the floor or the weights).

Read-only: the replay is neither recorded as an injection nor counted as a use, and writes no
audit entry (a read of the console, like any other).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .audit import Actor
from .errors import ValidationError
from .models import STATUS_ARCHIVED, STATUS_SUPERSEDED, AuditEntry, Episode, InjectionSnapshot
from .retrieval import retrieve
from .scopes import ScopeKeys

SAME, UP, DOWN, ADDED, DROPPED = "same", "moved_up", "moved_down", "added", "dropped"
EDITED, ARCHIVED, SUPERSEDED, DELETED, RESTORED, NEW, RANKING = (
    "edited",
    "archived",
    "superseded",
    "deleted",
    "restored",
    "new",
    "ranking",
)


@dataclass(frozen=True)
class ReplayRow:
    episode_id: str
    content: str
    then_rank: int | None  # 1-based; None when it was not injected then
    now_rank: int | None  # None when it would not be injected now
    change: str
    reason: str = ""
    then_score: float | None = None
    now_score: float | None = None


@dataclass
class Replay:
    snapshot: InjectionSnapshot
    query: str
    speaker_id: str
    rows: list[ReplayRow] = field(default_factory=list)

    @property
    def unchanged(self) -> bool:
        return all(row.change == SAME and not row.reason for row in self.rows)


def replay(keys: ScopeKeys, actor: Actor, snapshot: InjectionSnapshot) -> Replay:
    """The snapshot's retrieval, run now, beside what was injected then. `snapshot` must be the scope's."""
    actor.require_bot(keys)
    if snapshot.user_key != keys.user_key:
        raise ValidationError("this snapshot belongs to another memory space")
    payload = snapshot.payload
    decision: dict[str, Any] = payload["retrieval"] if isinstance(payload.get("retrieval"), dict) else {}
    query = str(payload.get("query") or decision.get("query") or "").strip()
    if not query:
        raise ValidationError("this injection kept no query, so it cannot be replayed")
    speaker: dict[str, Any] = payload["speaker"] if isinstance(payload.get("speaker"), dict) else {}
    speaker_id = str(speaker.get("id") or snapshot.speaker_id or "")
    injected = [e for e in payload.get("episodes") or [] if isinstance(e, dict) and e.get("episode_id")]
    top_k = int(decision.get("top_k") or max(len(injected), 3))
    found = retrieve(keys, query, top_k=top_k, speaker_id=speaker_id or None, actor=actor, distinct=True)

    then = {str(e["episode_id"]): (rank, e) for rank, e in enumerate(injected, 1)}
    now = {hit.episode.episode_id: (rank, hit) for rank, hit in enumerate(found.hits, 1)}
    rows_now = {e.episode_id: e for e in Episode.objects.in_scope(keys.user_key).with_ids(list(set(then) | set(now)))}
    since = _changes_since(keys, snapshot, set(then) | set(now))
    result = Replay(snapshot, query, speaker_id)
    for episode_id, (rank, record) in then.items():
        row = rows_now.get(episode_id)
        if episode_id in now:
            now_rank, hit = now[episode_id]
            change = SAME if now_rank == rank else UP if now_rank < rank else DOWN
            reason = _why_moved(episode_id, record, row, since)
            if change == SAME and reason == RANKING:
                reason = ""  # the same place for the same reasons
            result.rows.append(
                ReplayRow(
                    episode_id, hit.episode.content, rank, now_rank, change, reason, record.get("score"), hit.score
                )
            )
        else:
            content = row.content if row is not None else str(record.get("content", ""))
            result.rows.append(
                ReplayRow(
                    episode_id, content, rank, None, DROPPED, _why_dropped(record, row, since), record.get("score")
                )
            )
    for episode_id, (now_rank, hit) in now.items():
        if episode_id not in then:
            reason = _why_added(snapshot, hit.episode, since.get(episode_id, []))
            result.rows.append(
                ReplayRow(episode_id, hit.episode.content, None, now_rank, ADDED, reason, None, hit.score)
            )
    result.rows.sort(key=lambda r: (r.now_rank is None, r.now_rank or 0, r.then_rank or 0))
    return result


def _changes_since(keys: ScopeKeys, snapshot: InjectionSnapshot, ids: set[str]) -> dict[str, list[str]]:
    """The lifecycle operations on these episodes after the snapshot, oldest first, per episode."""
    entries = AuditEntry.objects.filter(
        user_key=keys.user_key,
        target_type="episode",
        target_id__in=list(ids),
        timestamp__gt=snapshot.recorded_at,
        operation__in=("archive", "restore", "delete", "episode_edit", "episode_reassign"),
    ).order_by("id")
    changes: dict[str, list[str]] = {}
    for target_id, operation in entries.values_list("target_id", "operation"):
        changes.setdefault(target_id, []).append(operation)
    return changes


def _why_dropped(record: dict[str, Any], row: Episode | None, since: dict[str, list[str]]) -> str:
    if row is None:
        return DELETED
    if row.status == STATUS_SUPERSEDED:
        return SUPERSEDED
    if row.status == STATUS_ARCHIVED:
        return ARCHIVED
    operations = since.get(row.episode_id, [])
    if (
        "episode_edit" in operations
        or "episode_reassign" in operations
        or row.content != record.get("content", row.content)
    ):
        return EDITED
    return RANKING


def _why_moved(episode_id: str, record: dict[str, Any], row: Episode | None, since: dict[str, list[str]]) -> str:
    operations = since.get(episode_id, [])
    if row is not None and ("episode_edit" in operations or row.content != record.get("content", row.content)):
        return EDITED
    return RANKING


def _why_added(snapshot: InjectionSnapshot, episode: Episode, operations: list[str]) -> str:
    if episode.created_at > snapshot.recorded_at:
        return NEW
    if "restore" in operations:
        return RESTORED
    if "episode_edit" in operations or "episode_reassign" in operations:
        return EDITED
    return RANKING
