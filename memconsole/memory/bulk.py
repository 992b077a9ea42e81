"""Bulk actions on a scope's episodes: archive, restore or delete a selection or every episode a
filter matches, as one audited batch (`audit.batch()`: the entries share a batch id)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import queries
from .audit import Actor, batch
from .episodes import archive, delete, restore
from .errors import ValidationError
from .models import AuditEntry, Episode, Status
from .paging import chunks
from .scopes import ScopeKeys

ACTIONS = ("archive", "restore", "delete")
# The status an action leaves an episode in: those already in it do not change.
RESULT = {"archive": Status.ARCHIVED.value, "restore": Status.ACTIVE.value}
# At most this many episodes in one bulk-by-filter run (one transaction per chunk of CHUNK).
MAX_BY_FILTER = 5_000
CHUNK = 500
PREVIEW_ROWS = 50
# A run of more than one chunk is a background job with progress (`jobkinds.run_bulk`).
IN_BACKGROUND_ABOVE = CHUNK

Progress = Callable[[str, int, int | None], None]


@dataclass(frozen=True)
class Preview:
    """What a bulk action would do: `ids` it would act on (in order), how many of them it would
    change, the first PREVIEW_ROWS `episodes`, and whether more than MAX_BY_FILTER matched."""

    action: str
    ids: list[str]
    changing: int
    episodes: list[Episode]
    capped: bool = False

    @property
    def total(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Outcome:
    batch_id: str
    changed: int


def _check(action: str) -> None:
    if action not in ACTIONS:
        raise ValidationError("unknown bulk action", field="action")


def preview_selected(keys: ScopeKeys, action: str, episode_ids: list[str]) -> Preview:
    """The preview of acting on these selected episodes (those absent from the scope are left out)."""
    _check(action)
    statuses = queries.episode_statuses(keys, episode_ids)
    ids = [i for i in dict.fromkeys(episode_ids) if i in statuses]
    return _preview(keys, action, ids, statuses, capped=False)


def preview_matching(keys: ScopeKeys, action: str, filters: dict[str, Any]) -> Preview:
    """The preview of acting on every episode passing `filters` (`EpisodeFilter.build`'s), newest
    stored first, at most MAX_BY_FILTER of them (`capped` when more match)."""
    _check(action)
    ids = queries.matching_episode_ids(keys, MAX_BY_FILTER + 1, **filters)
    capped = len(ids) > MAX_BY_FILTER
    ids = ids[:MAX_BY_FILTER]
    statuses: dict[str, str] = {}
    for part in chunks(ids, CHUNK):
        statuses.update(queries.episode_statuses(keys, list(part)))
    return _preview(keys, action, ids, statuses, capped=capped)


def _preview(keys: ScopeKeys, action: str, ids: list[str], statuses: dict[str, str], *, capped: bool) -> Preview:
    result = RESULT.get(action)
    changing = sum(1 for i in ids if statuses.get(i) != result) if result else len(ids)
    shown = {e.episode_id: e for e in queries.episodes_by_ids(keys, ids[:PREVIEW_ROWS])}
    episodes = [shown[i] for i in ids[:PREVIEW_ROWS] if i in shown]
    return Preview(action, ids, changing, episodes, capped)


def run(
    keys: ScopeKeys,
    actor: Actor,
    action: str,
    episode_ids: list[str],
    *,
    batch_id: str = "",
    progress: Progress | None = None,
) -> Outcome:
    """Act on these episodes of the scope as one batch (`batch_id`, or a new one); `changed` counts
    those that changed.

    Runs in chunks of CHUNK (one transaction each, so a large run never holds the write lock for
    long); every audit entry of every chunk carries the same batch id. An episode gone since the
    preview (deleted by a bot, or by this run's earlier attempt) is left out, so a run repeated
    after its worker stopped does only what is left. `progress(action, done, total)` follows it."""
    _check(action)
    changed = 0
    ids = list(dict.fromkeys(episode_ids))
    with batch(batch_id) as batch_id:
        for done, part in enumerate(chunks(ids, CHUNK)):
            if progress is not None:
                progress(action, done * CHUNK, len(ids))
            present = queries.episode_statuses(keys, list(part))
            still = [i for i in part if i in present]
            if not still:
                continue
            if action == "delete":
                changed += delete(keys, actor, still)
            elif action == "archive":
                changed += len(archive(keys, actor, still))
            else:
                changed += len(restore(keys, actor, still))
        if progress is not None:
            progress(action, len(ids), len(ids))
    return Outcome(batch_id, changed)


def changed_in(batch_id: str, action: str) -> int:
    """How many episodes a batch's action changed, from its audit entries (whatever attempts it took)."""
    return AuditEntry.objects.filter(batch_id=batch_id, operation=action).count()
