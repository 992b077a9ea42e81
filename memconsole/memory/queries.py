"""The console's read-side queries: what its screens list, count and look up.

Every function reads within one scope (by its keys) or within the scopes an `Actor` may see, so
the console's screens never write a query of their own. Lists are keyset pages (`paging`), never
OFFSET; counts come from the per-scope counters, or from a COUNT bounded by COUNT_LIMIT.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import CharField, Count, F, Max, Q, QuerySet, Value
from django.db.models.functions import Concat, Substr
from django.db.models.lookups import Exact, GreaterThanOrEqual, In

from .audit import Actor
from .errors import ValidationError
from .filters import EpisodeFilter
from .models import (
    ISOLATION_BOT,
    ISOLATION_SESSION,
    PROFILE_SPEAKER,
    STATUSES,
    AuditEntry,
    Episode,
    EpisodeCounts,
    EpisodeQuerySet,
    HealthRun,
    InjectionSnapshot,
    Profile,
    ProfileVersion,
    Scope,
)
from .paging import SORTED_CURSOR, KeysetPage, SortedPage, SortKey, keyset_page, sorted_page
from .scopes import GLOBAL_USER_KEY, RESERVED_BOT_UUID, ScopeKeys
from .validation import MAX_IMPORTANCE, validate_list_limit

# --- scopes -------------------------------------------------------------------------------------


def visible_scopes(actor: Actor) -> QuerySet[Scope]:
    """The Scope rows this actor may see (all of them, or those of its bots)."""
    scopes = Scope.objects.all()
    if actor.bot_uuids is not None:
        scopes = scopes.filter(bot_uuid__in=actor.bot_uuids)
    return scopes


def visible_scope(actor: Actor, scope_id: int) -> Scope | None:
    """The scope with this id when the actor may see it, else None (whether absent or not granted)."""
    return visible_scopes(actor).filter(pk=scope_id).first()


def bot_sessions(bot_uuids: Iterable[str], limit: int) -> list[Scope]:
    """The spaces of these bots, most recently seen first (what a bot token may use)."""
    return list(Scope.objects.filter(bot_uuid__in=list(bot_uuids)).order_by("-last_seen", "-id")[:limit])


def registered_scope(keys: ScopeKeys) -> Scope | None:
    """The Scope row of these keys, None while the space was never seen."""
    return Scope.objects.filter(scope_key=keys.scope_key, isolation=keys.isolation).first()


def registered_scopes(targets: Iterable[tuple[str, str]]) -> list[Scope]:
    """The Scope rows of these (scope_key, isolation) pairs that exist, in the same order."""
    rows = (Scope.objects.filter(scope_key=scope_key, isolation=isolation).first() for scope_key, isolation in targets)
    return [row for row in rows if row is not None]


# How many chats a bot-isolation space lists beneath it, and how many spaces a speaker search finds.
SPACE_CHATS = 50
SPEAKER_SPACES = 200


def _speaker_user_keys(search: str) -> list[str]:
    """The memories (user_keys) holding episodes of a speaker with this id or name (any case)."""
    rows = Episode.objects.filter(Q(sender_id=search) | Q(sender_name__iexact=search)).values_list(
        "user_key", flat=True
    )
    return list(rows.distinct()[:SPEAKER_SPACES])


def space_page(actor: Actor, search: str, cursor: str | None, limit: int) -> KeysetPage:
    """A page of the visible memory spaces, one row per memory (user_key), newest first: under bot
    isolation every chat of a bot shares one memory, listed once with its `chats` beneath (the
    row is its newest chat). `search` matches a session name, bot, scope key, user key, or a
    speaker's id or name (any case). Each row carries its `counts`."""
    rows = visible_scopes(actor)
    if search:
        rows = rows.filter(
            Q(session_name__icontains=search)
            | Q(bot_uuid__icontains=search)
            | Q(scope_key__icontains=search)
            | Q(user_key__icontains=search)
            | Q(user_key__in=_speaker_user_keys(search))
        )
    newest = rows.values("user_key").annotate(top=Max("id")).values("top")
    page = keyset_page(Scope.objects.filter(pk__in=newest), "id", cursor, limit)
    counts = EpisodeCounts.objects.in_bulk({scope.user_key for scope in page.items}, field_name="user_key")
    shared = [scope.user_key for scope in page.items if scope.isolation == ISOLATION_BOT]
    chats: dict[str, list[Scope]] = {}
    for chat in visible_scopes(actor).filter(user_key__in=shared, isolation=ISOLATION_BOT).order_by("session_name"):
        chats.setdefault(chat.user_key, []).append(chat)
    for scope in page.items:
        scope.counts = counts.get(scope.user_key) or EpisodeCounts(user_key=scope.user_key)
        scope.chats = chats.get(scope.user_key, [])[:SPACE_CHATS]
        scope.chat_count = len(chats.get(scope.user_key, []))
    return page


def stored_counts(keys: ScopeKeys) -> EpisodeCounts | None:
    """The scope's episode counters, None while nothing was ever stored in it."""
    return EpisodeCounts.objects.filter(user_key=keys.user_key).first()


def scope_counts(keys: ScopeKeys) -> EpisodeCounts:
    """The scope's episode counters (all zero while nothing was ever stored)."""
    return stored_counts(keys) or EpisodeCounts(user_key=keys.user_key)


# --- episodes -----------------------------------------------------------------------------------


def newer_versions(keys: ScopeKeys, episode: Episode, limit: int) -> list[Episode]:
    """The episodes that superseded this one, nearest first (at most `limit`, stopping at a loop)."""
    newer: list[Episode] = []
    current: Episode | None = episode
    while current is not None and current.superseded_by and len(newer) < limit:
        current = Episode.objects.in_scope(keys.user_key).filter(episode_id=current.superseded_by).first()
        if current is None or current in newer:
            break
        newer.append(current)
    return newer


def replaced_episodes(keys: ScopeKeys, episode: Episode, limit: int) -> list[Episode]:
    """The episodes this one superseded, newest first."""
    rows = Episode.objects.in_scope(keys.user_key).filter(superseded_by=episode.episode_id)
    return list(rows.order_by("-id")[:limit])


# The Episodes tab's orders: "Newest first" is by the event time its Time column shows (then by
# id); "stored" is the order the rows were written in (by id). Each has its indexes (0015).
EPISODE_SORTS = {
    "time": SortKey("timestamp", is_time=True, nullable=True),
    "importance": SortKey("importance"),
    "stored": SortKey("id"),
}
# Above this many matching rows a filtered count stops counting and says "more than".
COUNT_LIMIT = 10_000


@dataclass(frozen=True)
class EpisodeCount:
    """How many episodes pass the filters (`matching`, a lower bound when `capped`) of `total`
    (the scope's episodes in the chosen statuses, from its counters)."""

    matching: int
    total: int
    capped: bool = False
    filtered: bool = False  # whether filters other than the statuses narrow the list
    estimated: bool = False  # `matching` extrapolated from the newest COUNT_LIMIT rows (see `_count`)


def episode_page(
    keys: ScopeKeys, *, sort: str = "time", cursor: str | None = None, limit: int = 25, **filters: Any
) -> tuple[SortedPage, EpisodeCount]:
    """A page of the scope's episodes in `sort` order (EPISODE_SORTS), with the filtered count.

    `filters` are `EpisodeFilter.build`'s (`statuses=None`: every status). The count comes from
    the scope's counters when only statuses filter, else from a count bounded by COUNT_LIMIT."""
    validate_list_limit(limit)
    if sort not in EPISODE_SORTS:
        raise ValidationError("unknown sort order", field="sort")
    if cursor not in (None, "") and not (isinstance(cursor, str) and SORTED_CURSOR.fullmatch(cursor)):
        raise ValidationError("bad page cursor", field="cursor")
    where = EpisodeFilter.build(keys, **filters)
    counted = _count(keys, where)
    total = None if counted.capped or counted.estimated else counted.matching
    rows = _planned(where, sort)
    return sorted_page(rows, EPISODE_SORTS[sort], cursor or None, limit, total), counted


def _unindexed(field: str) -> Concat:
    """The column as an expression no index serves (`status || ''`): a hint for SQLite's planner."""
    return Concat(F(field), Value(""), output_field=CharField())


def _planned(where: EpisodeFilter, sort: str) -> EpisodeQuerySet:
    """The filtered rows, written so that a planner without statistics (SQLite's) seeks the index
    of the order: with a speaker, (scope, speaker, order, id) rather than walking the scope's
    status index for that speaker's rows; with a minimum importance and another order, the
    order's index filtered by importance rather than every important row sorted. PostgreSQL gets
    the plain form (hinted, it sorts a speaker's rows: 15 ms, not 0.2, at 1M). The same rows."""
    hidden: dict[str, Any] = {}
    if where.sender_id and where.statuses is not None:
        hidden["statuses"] = None
    if where.importance_min is not None and sort != "importance":
        hidden["importance_min"] = None
    if not hidden or connection.vendor != "sqlite":
        return where.episodes()
    rows = replace(where, **hidden).episodes()
    if "statuses" in hidden and where.statuses is not None:
        rows = rows.filter(In(_unindexed("status"), list(where.statuses)))
    if "importance_min" in hidden and where.importance_min is not None:
        rows = rows.filter(GreaterThanOrEqual(F("importance") + 0, where.importance_min))
    return rows


def episode_count(keys: ScopeKeys, **filters: Any) -> EpisodeCount:
    """The `EpisodeCount` of these filters (`EpisodeFilter.build`'s; see `episode_page`)."""
    return _count(keys, EpisodeFilter.build(keys, **filters))


def _count(keys: ScopeKeys, where: EpisodeFilter) -> EpisodeCount:
    """Only statuses: the counters. A speaker (and time bounds): an exact COUNT through the
    (scope, speaker, ...) index, stopping at COUNT_LIMIT ("more than"). Otherwise (tags,
    importance, kind, which no index narrows): exact while the scope's rows in these statuses are
    at most COUNT_LIMIT, else estimated from the newest COUNT_LIMIT of them ("about"), so that a
    count never reads more than COUNT_LIMIT index entries."""
    counts = scope_counts(keys)
    statuses = where.statuses if where.statuses is not None else STATUSES
    total = sum(int(getattr(counts, status, 0)) for status in statuses)
    narrowed = EpisodeFilter(user_key=keys.user_key, statuses=where.statuses)
    if where == narrowed:
        return EpisodeCount(total, total)
    index_served = replace(
        narrowed, sender_id=where.sender_id, time_after=where.time_after, time_before=where.time_before
    )
    # "Used in the last N days" is exact too: a list of used ids (usage.used_where) bounds it.
    if where == index_served or total <= COUNT_LIMIT or where.used_within_days is not None:
        matching = where.episodes().order_by()[: COUNT_LIMIT + 1].count()  # (scope, speaker, status)
        return EpisodeCount(min(matching, COUNT_LIMIT), total, matching > COUNT_LIMIT, filtered=True)
    # The COUNT_LIMIT-th newest id, from the (scope, status, id) index alone; then the matching rows
    # from it on: a minimum importance as its levels, each (status, level) a seek of the (scope,
    # status, importance, id) index that reads no row (0.1 ms at 1M); other filters read the rows.
    oldest = next(iter(narrowed.episodes().order_by("-id").values_list("id", flat=True)[COUNT_LIMIT - 1 :][:1]), 0)
    sampled = _planned(replace(where, importance_min=None), "time").filter(id__gte=oldest)
    if where.importance_min is not None:
        sampled = sampled.filter(importance__in=range(where.importance_min, MAX_IMPORTANCE + 1))
    estimate = round(sampled.count() * total / COUNT_LIMIT)
    return EpisodeCount(estimate, total, filtered=True, estimated=True)


def matching_episode_ids(keys: ScopeKeys, limit: int, **filters: Any) -> list[str]:
    """The ids of at most `limit` episodes passing the filters, newest first (bulk by filter)."""
    where = EpisodeFilter.build(keys, **filters)
    return list(where.episodes().order_by("-id").values_list("episode_id", flat=True)[:limit])


def episodes_by_ids(keys: ScopeKeys, episode_ids: list[str]) -> list[Episode]:
    """The scope's episodes among `episode_ids`, newest first (a bulk preview lists them)."""
    return list(Episode.objects.in_scope(keys.user_key).with_ids(episode_ids).order_by("-id"))


def episode_statuses(keys: ScopeKeys, episode_ids: list[str]) -> dict[str, str]:
    """{episode_id: status} of those among `episode_ids` that are in this scope (bulk previews)."""
    rows = Episode.objects.in_scope(keys.user_key).with_ids(episode_ids)
    return dict(rows.values_list("episode_id", "status"))


# --- profiles -----------------------------------------------------------------------------------


def speaker_profile_page(keys: ScopeKeys, cursor: str | None, limit: int) -> KeysetPage:
    """A page of the scope's speaker profiles, newest first."""
    rows = Profile.objects.filter(scope_key=keys.scope_key, type=PROFILE_SPEAKER)
    return keyset_page(rows, "id", cursor, limit)


def profile_version_page(profile: Profile, cursor: str | None, limit: int) -> KeysetPage:
    """A page of a profile's stored versions, newest first."""
    return keyset_page(profile.versions.all(), "version", cursor, limit)


def profile_versions(profile: Profile, versions: Iterable[int]) -> dict[int, ProfileVersion]:
    """{version: row} of those of `versions` that the profile has."""
    return {row.version: row for row in profile.versions.filter(version__in=list(versions))}


# --- injection snapshots ------------------------------------------------------------------------


def _snapshots(keys: ScopeKeys) -> QuerySet[InjectionSnapshot]:
    return InjectionSnapshot.objects.filter(scope_key=keys.scope_key, isolation=keys.isolation)


def snapshot_page(keys: ScopeKeys, cursor: str | None, limit: int) -> KeysetPage:
    """A page of the scope's injection snapshots, newest first."""
    return keyset_page(_snapshots(keys), "id", cursor, limit)


def latest_snapshot(keys: ScopeKeys) -> InjectionSnapshot | None:
    return _snapshots(keys).order_by("-id").first()


def find_snapshot(keys: ScopeKeys, snapshot_id: str) -> InjectionSnapshot | None:
    """The scope's snapshot with this id, None when absent or another scope's."""
    return _snapshots(keys).filter(snapshot_id=snapshot_id).first()


# --- audit --------------------------------------------------------------------------------------


def scope_audit_entries(keys: ScopeKeys) -> QuerySet[AuditEntry]:
    """Every audit entry written in the scope's chat (what the audit screen lists and the exports
    carry): selected by scope_key, never by the user_key that bot isolation shares between a bot's
    chats. Entries about episodes carry the chat they were written in too; an episode's whole
    history, whichever chat changed it, is `episode_history`."""
    return AuditEntry.objects.filter(scope_key=keys.scope_key)


@dataclass(frozen=True)
class AuditFilter:
    """The audit screen's filters, each optional (texts already checked by the console's form)."""

    operation: str = ""  # one operation, any case
    actor: str = ""  # a part of the actor's label, any case
    after: datetime | None = None
    before: datetime | None = None
    space: str = ""  # a scope key, or a bot_uuid for every space of that bot
    target: str = ""  # a target id, or "<target type>:<target id>"
    batch: str = ""  # a bulk action's batch id (`audit.batch()`)

    def apply(self, rows: QuerySet[AuditEntry]) -> QuerySet[AuditEntry]:
        if self.operation:
            rows = rows.filter(operation__iexact=self.operation)
        if self.actor:
            rows = rows.filter(actor__icontains=self.actor)
        if self.after:
            rows = rows.filter(timestamp__gte=self.after)
        if self.before:
            rows = rows.filter(timestamp__lt=self.before)
        if self.space:
            rows = rows.filter(Q(scope_key=self.space) if ":" in self.space else bot_audit_entries(self.space))
        if self.target:
            target_type, _, target_id = self.target.partition(":")
            if target_type in AUDIT_TARGET_TYPES and target_id:
                rows = rows.filter(target_type=target_type, target_id=target_id)
            else:
                rows = rows.filter(target_id=self.target)
        if self.batch:
            rows = rows.filter(batch_id=self.batch)
        return rows


# The target types the audit log records (a "<type>:<id>" target filter names one of them).
AUDIT_TARGET_TYPES = frozenset(
    {"episode", "scope", "session_profile", "speaker_profile", "bot_token", "user", "health_run", "subject"}
)


def bot_audit_entries(bot_uuid: str) -> Q:
    """The entries of one bot's spaces: by scope key (`<bot>:<session>`) or bot-isolation user key.
    Compared exactly, not with LIKE, which ignores case on SQLite."""
    if not bot_uuid:
        return (~Q(scope_key__contains=":") & ~Q(scope_key="")) | Q(user_key=GLOBAL_USER_KEY)
    prefix = f"{bot_uuid}:"
    return Q(Exact(Substr("scope_key", 1, len(prefix)), prefix)) | Q(user_key=f"{RESERVED_BOT_UUID}:{bot_uuid}")


def visible_audit_entries(actor: Actor) -> QuerySet[AuditEntry]:
    """Every entry the actor may read: all, or for an actor limited to some bots those of their
    spaces and, of those outside any space (token and user events), the ones they wrote themselves."""
    if actor.bot_uuids is None:
        return AuditEntry.objects.all()
    visible = Q(chain="", actor=actor.label[:255])
    for bot_uuid in sorted(actor.bot_uuids):
        visible |= bot_audit_entries(bot_uuid)
    return AuditEntry.objects.filter(visible)


def audit_page(
    keys: ScopeKeys | None,
    cursor: str | None,
    limit: int,
    *,
    operation: str = "",
    actor: str = "",
    filters: AuditFilter | None = None,
    viewer: Actor | None = None,
) -> KeysetPage:
    """A page of audit entries, newest first: those of one scope (`scope_audit_entries`), or with
    `keys=None` those the `viewer` may read across every space; filtered by `filters` (or the
    shorthand `operation`/`actor`)."""
    filters = filters or AuditFilter(operation=operation, actor=actor)
    rows = visible_audit_entries(viewer or Actor.system()) if keys is None else scope_audit_entries(keys)
    return keyset_page(filters.apply(rows), "id", cursor, limit)


def batch_sizes(batch_ids: Iterable[str], keys: ScopeKeys | None = None) -> dict[str, int]:
    """{batch_id: its audit entries} (`audit.batch()`), in the chat's own list when `keys` is given."""
    ids = {batch_id for batch_id in batch_ids if batch_id}
    rows = (scope_audit_entries(keys) if keys else AuditEntry.objects).filter(batch_id__in=ids).values_list("batch_id")
    return dict(rows.annotate(n=Count("id")).values_list("batch_id", "n"))


def attach_spaces(entries: Iterable[AuditEntry], viewer: Actor) -> None:
    """Sets `entry.space` to the visible Scope row the entry belongs to (None outside any space)."""
    entries = list(entries)
    rows = visible_scopes(viewer).filter(scope_key__in={entry.scope_key for entry in entries if entry.scope_key})
    by_keys = {(scope.scope_key, scope.isolation): scope for scope in rows}
    for entry in entries:
        isolation = ISOLATION_SESSION if entry.user_key == entry.scope_key else ISOLATION_BOT
        entry.space = by_keys.get((entry.scope_key, isolation))  # type: ignore[attr-defined]


def episode_history(keys: ScopeKeys, episode_id: str, limit: int) -> list[AuditEntry]:
    """The newest audit entries about one episode of the scope, written in any of the chats that
    share it (bot isolation), unlike a chat's own list (`scope_audit_entries`)."""
    rows = AuditEntry.objects.filter(user_key=keys.user_key, target_type="episode", target_id=episode_id)
    return list(rows.order_by("-id")[:limit])


# --- health -------------------------------------------------------------------------------------


def health_run_page(cursor: str | None, limit: int) -> KeysetPage:
    """A page of the stored health runs, newest first."""
    return keyset_page(HealthRun.objects.all(), "id", cursor, limit)


def latest_health_run() -> HealthRun | None:
    return HealthRun.objects.order_by("-id").first()
