"""Memory health as numbers per day (issue 18), for one memory space or one bot: injections, the
share of them that carried no memory, characters injected, memories stored, archived and
superseded, and the most- and never-used memories.

Days are calendar days in the current time zone (the console's chosen one). Every figure is one
grouped query over an indexed column; the console draws them as SVG charts and offers them as CSV.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from .audit import Actor
from .models import STATUS_ACTIVE, STATUS_SUPERSEDED, AuditEntry, Episode, InjectionSnapshot
from .queries import bot_audit_entries
from .scopes import ScopeKeys
from .usage_models import EpisodeUse

DEFAULT_DAYS, MAX_DAYS = 30, 365
TOP = 10
CSV_COLUMNS = ("day", "injections", "without_memory", "chars_injected", "stored", "archived", "superseded")


@dataclass
class Day:
    day: date
    injections: int = 0
    without_memory: int = 0
    chars_injected: int = 0
    stored: int = 0
    archived: int = 0
    superseded: int = 0

    @property
    def share_without_memory(self) -> float:
        return self.without_memory / self.injections if self.injections else 0.0

    def row(self) -> list[Any]:
        return [getattr(self, column) if column != "day" else self.day.isoformat() for column in CSV_COLUMNS]


@dataclass
class Insights:
    since: date
    days: list[Day]
    most_used: list[tuple[Episode, int]] = field(default_factory=list)
    never_used: list[Episode] = field(default_factory=list)
    never_used_total: int = 0

    @property
    def injections(self) -> int:
        return sum(day.injections for day in self.days)

    @property
    def share_without_memory(self) -> float:
        total = self.injections
        return sum(day.without_memory for day in self.days) / total if total else 0.0


@dataclass(frozen=True)
class _Rows:
    """The rows one set of figures reads: a space's (by user key) or a bot's."""

    snapshots: QuerySet[InjectionSnapshot]
    episodes: QuerySet[Episode]
    audit: QuerySet[AuditEntry]
    uses: QuerySet[EpisodeUse]


def validate_days(value: Any) -> int:
    """The window asked for, 1 to MAX_DAYS days (DEFAULT_DAYS for anything else)."""
    try:
        days = int(value)
    except (TypeError, ValueError):
        return DEFAULT_DAYS
    return days if 1 <= days <= MAX_DAYS else DEFAULT_DAYS


def for_space(keys: ScopeKeys, actor: Actor, days: int = DEFAULT_DAYS) -> Insights:
    """The figures of one memory space (every chat that shares its user key)."""
    actor.require_bot(keys)
    rows = _Rows(
        InjectionSnapshot.objects.filter(user_key=keys.user_key),
        Episode.objects.in_scope(keys.user_key),
        AuditEntry.objects.filter(user_key=keys.user_key),
        EpisodeUse.objects.filter(user_key=keys.user_key),
    )
    return _insights(rows, days)


def for_bot(bot_uuid: str, actor: Actor, days: int = DEFAULT_DAYS) -> Insights:
    """The figures of every space of one bot (its chats, and its shared memory under bot isolation)."""
    actor.require_bot(bot_uuid)
    snapshots = InjectionSnapshot.objects.filter(bot_audit_entries(bot_uuid))
    rows = _Rows(
        snapshots,
        Episode.objects.filter(bot_uuid=bot_uuid),
        AuditEntry.objects.filter(bot_audit_entries(bot_uuid)),
        EpisodeUse.objects.filter(snapshot__in=snapshots),
    )
    return _insights(rows, days)


def _insights(rows: _Rows, days: int) -> Insights:
    today = timezone.localdate()
    since = today - timedelta(days=days - 1)
    start = timezone.make_aware(datetime.combine(since, datetime.min.time()))
    by_day = {since + timedelta(days=n): Day(since + timedelta(days=n)) for n in range(days)}

    injections = (
        rows.snapshots.filter(recorded_at__gte=start)
        .annotate(day=TruncDate("recorded_at"))
        .values("day")
        .annotate(n=Count("id"), empty=Count("id", filter=Q(episode_count=0)), chars=Sum("injection_chars"))
    )
    for row in injections:
        if row["day"] in by_day:
            day = by_day[row["day"]]
            day.injections, day.without_memory, day.chars_injected = row["n"], row["empty"], row["chars"] or 0
    _count_into(by_day, rows.episodes.filter(created_at__gte=start), "created_at", "stored")
    # A superseded episode last changed when it was superseded (an edit of it would move the day).
    superseded = rows.episodes.filter(status=STATUS_SUPERSEDED, updated_at__gte=start)
    _count_into(by_day, superseded, "updated_at", "superseded")
    archived = rows.audit.filter(operation="archive", target_type="episode", timestamp__gte=start)
    _count_into(by_day, archived, "timestamp", "archived")

    insights = Insights(since, [by_day[day] for day in sorted(by_day)])
    window_uses = rows.uses.filter(used_at__gte=start)
    grouped = window_uses.values("user_key", "episode_id").annotate(n=Count("id")).order_by("-n", "episode_id")
    top: list[tuple[str, str, int]] = [(u["user_key"], u["episode_id"], u["n"]) for u in grouped[:TOP]]
    found = {(e.user_key, e.episode_id): e for e in _episodes_of(rows.episodes, [t[1] for t in top])}
    for user_key, episode_id, uses in top:
        episode = found.get((user_key, episode_id))
        if episode is not None:  # not deleted since
            insights.most_used.append((episode, uses))
    unused = rows.episodes.filter(status=STATUS_ACTIVE).exclude(episode_id__in=rows.uses.values("episode_id"))
    insights.never_used_total = unused.count()
    insights.never_used = list(unused.order_by("id")[:TOP])
    return insights


def _count_into(by_day: dict[date, Day], queryset: QuerySet[Any], stamp: str, column: str) -> None:
    for row in queryset.annotate(day=TruncDate(stamp)).values("day").annotate(n=Count("id")):
        if row["day"] in by_day:
            setattr(by_day[row["day"]], column, row["n"])


def _episodes_of(episodes: QuerySet[Episode], episode_ids: list[str]) -> list[Episode]:
    return list(episodes.filter(episode_id__in=episode_ids)) if episode_ids else []
