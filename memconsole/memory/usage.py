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

from django.db.models import Count, Exists, Max, OuterRef, QuerySet
from django.utils import timezone

from .models import Episode, InjectionSnapshot
from .scopes import ScopeKeys
from .usage_models import EpisodeUse


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


def used(queryset: QuerySet[Episode], user_key: str, *, within_days: int | None = None) -> QuerySet[Episode]:
    """The episodes of `queryset` used at all (or in the last `within_days` days)."""
    uses = EpisodeUse.objects.filter(user_key=user_key, episode_id=OuterRef("episode_id"))
    if within_days is not None:
        uses = uses.filter(used_at__gte=timezone.now() - timedelta(days=within_days))
    return queryset.filter(Exists(uses))


def never_used(queryset: QuerySet[Episode], user_key: str) -> QuerySet[Episode]:
    """The episodes of `queryset` no injection has used (within the snapshot retention window)."""
    return queryset.exclude(Exists(EpisodeUse.objects.filter(user_key=user_key, episode_id=OuterRef("episode_id"))))
