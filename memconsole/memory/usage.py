"""How often each memory is used (issue 18): which injections put an episode into a prompt.

`record` writes one `EpisodeUse` row per injected episode, in the injection's own transaction (one
multi-row INSERT, so counting costs `inject` one statement). Only injections count: the console,
recall and exports read memory without using it. Uses go with their snapshot, so the counts cover
the snapshot retention window (MEMCONSOLE_SNAPSHOT_RETENTION_DAYS), which the console says.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import CharField, Count, Exists, F, Max, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Concat
from django.db.models.lookups import Exact
from django.utils import timezone

from .errors import ValidationError
from .models import Episode, InjectionSnapshot
from .scopes import ScopeKeys
from .usage_models import EpisodeUse

# "Used in the last N days" (the Episodes list's Usage filter): N from 1 to MAX_USED_DAYS.
DEFAULT_USED_DAYS = 7
MAX_USED_DAYS = 365
# Up to this many used episodes, "used" filters by their list of ids (see `used_where`).
USED_IDS_LIMIT = 10_000


def record(snapshot: InjectionSnapshot, episode_ids: Iterable[str]) -> None:
    """Count one use of each episode `snapshot` injected; call inside the injection's transaction."""
    rows = [
        EpisodeUse(snapshot=snapshot, user_key=snapshot.user_key, episode_id=episode_id, used_at=snapshot.recorded_at)
        for episode_id in dict.fromkeys(episode_ids)
    ]
    if rows:
        EpisodeUse.objects.bulk_create(rows)


@dataclass(frozen=True)
class Usage:
    uses: int
    last_used_at: datetime | None
    snapshots: list[InjectionSnapshot]  # the newest injections that used it (in any chat of the scope)


def episode_usage(keys: ScopeKeys, episode_id: str, limit: int = 20) -> Usage:
    """How many injections used this episode of the scope, when last, and the newest of them."""
    uses = EpisodeUse.objects.filter(user_key=keys.user_key, episode_id=episode_id)
    summary = uses.aggregate(n=Count("id"), last=Max("used_at"))
    newest = [use.snapshot for use in uses.select_related("snapshot").order_by("-used_at")[:limit]]
    return Usage(summary["n"], summary["last"], newest)


def use_counts(keys: ScopeKeys, episode_ids: Iterable[str]) -> dict[str, int]:
    """Uses per episode, for a page of episodes (one grouped query)."""
    ids = list(episode_ids)
    rows = (
        EpisodeUse.objects.filter(user_key=keys.user_key, episode_id__in=ids)
        .values("episode_id")
        .annotate(n=Count("id"))
    )
    return {row["episode_id"]: row["n"] for row in rows}


# Uses are keyed by the injecting space's memory (the snapshot's user_key): every filter below
# reads the uses of one memory, so an injection in another space or bot never marks an episode used.


def validate_used_days(value: Any, name: str = "used_within_days") -> int:
    """A "used in the last N days" window: a whole number of days from 1 to MAX_USED_DAYS, else refused."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_USED_DAYS:
        raise ValidationError(f"{name} must be a whole number of days from 1 to {MAX_USED_DAYS}", field=name)
    return value


def used_where(user_key: str, within_days: int | None = None) -> Q:
    """The episodes of the memory `user_key` an injection there used (in the last `within_days`
    days), as a filter that carries the scope itself (`EpisodeFilter.where` starts from it).

    The window's used ids are read first (index `use_scope_time`) and the episodes looked up by
    id, with the scope compared through an expression no index serves: otherwise SQLite's planner
    walks the list's order index past every unused episode for the few used ones (0.7 s in a
    200,000-episode scope with ten used). Past USED_IDS_LIMIT used ids, a subquery."""
    uses = EpisodeUse.objects.filter(user_key=user_key)
    if within_days is not None:
        uses = uses.filter(used_at__gte=timezone.now() - timedelta(days=within_days))
    ids = list(uses.order_by().values_list("episode_id", flat=True).distinct()[: USED_IDS_LIMIT + 1])
    if len(ids) > USED_IDS_LIMIT:
        return Q(user_key=user_key, episode_id__in=uses.values("episode_id"))
    scope = Exact(Concat(F("user_key"), Value(""), output_field=CharField()), user_key)
    return Q(scope, episode_id__in=ids)


def never_used_where(user_key: str) -> Q:
    """The episodes no injection in `user_key` used (within the snapshot retention window), as a
    filter: NOT EXISTS, probed per episode through `use_episode_time` while the list's order walks
    its index (most episodes of a large memory were never used, so a page fills quickly)."""
    uses = EpisodeUse.objects.filter(user_key=user_key, episode_id=OuterRef("episode_id"))
    return ~Q(Exists(uses))


def used(queryset: QuerySet[Episode], user_key: str, *, within_days: int | None = None) -> QuerySet[Episode]:
    """The episodes of `queryset` used at all (or in the last `within_days` days)."""
    return queryset.filter(used_where(user_key, within_days))


def never_used(queryset: QuerySet[Episode], user_key: str) -> QuerySet[Episode]:
    """The episodes of `queryset` no injection has used (within the snapshot retention window)."""
    return queryset.filter(never_used_where(user_key))
