"""One object for a scope's episode filters: the SQL filter and the vector index's filter."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from django.db.models import Q

from .errors import ValidationError
from .models import STATUSES, Episode, EpisodeQuerySet
from .scopes import ScopeKeys
from .usage import never_used_where, used_where, validate_used_days
from .validation import (
    MAX_TAG_CHARS,
    text,
    validate_datetime,
    validate_importance,
    validate_kind,
    validate_speaker,
    validate_statuses,
    validate_tags,
)


def _has_tag(tag: str) -> Q:
    # icontains: SQLite's LIKE ignores ASCII case anyway, so match tags that way on every database.
    return Q(tags_text__icontains="," + tag + ",")


def _never_used(value: Any, used_within_days: Any) -> bool:
    if not isinstance(value, bool):
        raise ValidationError("never_used must be true or false", field="never_used")
    if value and used_within_days is not None:
        raise ValidationError("never_used and used_within_days exclude each other", field="never_used")
    return value


def _sender(sender_id: Any) -> str:
    """The sender filter: absent or "" is every speaker's; one of spaces or invisible characters
    only is refused, not read as absent (a bot sending " " for someone meant someone)."""
    if sender_id is None or sender_id == "":
        return ""
    cleaned = validate_speaker(sender_id)
    if not cleaned:
        raise ValidationError(
            'sender_id holds only spaces or invisible characters: leave it out (or send "") for every speaker',
            field="sender_id",
        )
    return cleaned


@dataclass(frozen=True)
class EpisodeFilter:
    """Validated filters on one scope's episodes. `statuses=None` keeps every status (an empty list
    means active only); `tag` must be carried, `tags` keeps episodes carrying any of them. Both time
    bounds are inclusive, and a time without a zone is read as UTC."""

    user_key: str
    statuses: tuple[str, ...] | None = None
    sender_id: str = ""
    tag: str = ""
    tags: tuple[str, ...] = ()
    importance_min: int | None = None
    time_after: datetime | None = None
    time_before: datetime | None = None
    kind: str = ""  # an episode's kind (issue 20); "" keeps every kind
    # Usage (issue 18, memory/usage.py): used by an injection in the last N days, or never used.
    used_within_days: int | None = None
    never_used: bool = False

    @classmethod
    def build(
        cls,
        keys: ScopeKeys,
        *,
        statuses: Any = None,
        sender_id: Any = None,
        tag: Any = None,
        tags: Any = None,
        importance_min: Any = None,
        time_after: Any = None,
        time_before: Any = None,
        kind: Any = None,
        used_within_days: Any = None,
        never_used: Any = False,
    ) -> EpisodeFilter:
        """Validate the filters (`ValidationError` naming the bad one)."""
        clean_statuses = None
        if statuses is not None:
            clean_statuses = tuple(validate_statuses(statuses))
            if set(clean_statuses) == set(STATUSES):
                clean_statuses = None
        return cls(
            user_key=keys.user_key,
            statuses=clean_statuses,
            # Validated in this order (the first bad one is reported): tags, sender, tag, the rest.
            tags=tuple(validate_tags(tags)),
            sender_id=_sender(sender_id),
            tag=text(tag, "tag", MAX_TAG_CHARS, trim=True) if tag else "",
            importance_min=None if importance_min is None else validate_importance(importance_min, "importance_min"),
            time_after=validate_datetime(time_after, "time_after"),
            time_before=validate_datetime(time_before, "time_before"),
            kind=validate_kind(kind),
            used_within_days=None if used_within_days is None else validate_used_days(used_within_days),
            never_used=_never_used(never_used, used_within_days),
        )

    @cached_property
    def _used(self) -> Q | None:
        """The scope and the window's used episodes by id: read once per filter, though a list page
        (count, page) and a search (each stage) ask for `where()` several times."""
        return None if self.used_within_days is None else used_where(self.user_key, self.used_within_days)

    def where(self) -> Q:
        """The SQL filter, starting from the scope."""
        where = self._used if self._used is not None else Q(user_key=self.user_key)
        if self.statuses is not None:
            where &= Q(status__in=self.statuses)
        if self.sender_id:
            where &= Q(sender_id=self.sender_id)
        if self.tag:
            where &= _has_tag(self.tag)
        if self.importance_min is not None:
            where &= Q(importance__gte=self.importance_min)
        if self.time_after is not None:
            where &= Q(timestamp__gte=self.time_after)
        if self.time_before is not None:
            where &= Q(timestamp__lte=self.time_before)
        if self.kind:
            where &= Q(kind=self.kind)
        if self.never_used:
            where &= never_used_where(self.user_key)
        if self.tags:
            any_tag = Q()
            for tag in self.tags:
                any_tag |= _has_tag(tag)
            where &= any_tag
        return where

    def episodes(self) -> EpisodeQuerySet:
        """The scope's episodes that pass the filter."""
        return Episode.objects.filter(self.where())

    def index_where(self) -> dict[str, Any] | None:
        """The same filters in Chroma's metadata filter language, or None when there are none.

        Tags, the kind and usage are left out: vectors carry none of them (rows are re-filtered in SQL).
        """
        clauses: list[dict[str, Any]] = [{"user_key": self.user_key}]
        if self.statuses is not None:
            clauses.append({"status": {"$in": list(self.statuses)}})
        if self.sender_id:
            clauses.append({"sender_id": self.sender_id})
        if self.importance_min is not None:
            clauses.append({"importance": {"$gte": self.importance_min}})
        if self.time_after is not None:
            clauses.append({"timestamp": {"$gte": self.time_after.timestamp()}})
        if self.time_before is not None:
            clauses.append({"timestamp": {"$lte": self.time_before.timestamp()}})
        if len(clauses) == 1:
            return None
        return {"$and": clauses}
