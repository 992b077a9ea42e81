"""Keyset pagination on one integer column, newest first (episodes, scopes, profiles, audit
entries), and the batching helpers: the only copies of both.

Cursors: "a<n>" = the page after (older than) n, "b<n>" = the page before (newer than) n. There is
never an OFFSET and never a COUNT(*): a page costs the same on the first page as on the last.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db.models import QuerySet

from .errors import ValidationError

# ASCII digits only ("²" is a digit to isdigit), within 64 bits.
CURSOR = re.compile(r"[ab][0-9]{1,18}")

T = TypeVar("T")


def parse_cursor(cursor: Any) -> tuple[str, int] | None:
    """("a" | "b", n) for a well-formed cursor, None for none; ValidationError otherwise."""
    if cursor in (None, ""):
        return None
    if isinstance(cursor, str) and CURSOR.fullmatch(cursor):
        return cursor[0], int(cursor[1:])
    raise ValidationError("bad page cursor", field="cursor")


@dataclass
class KeysetPage:
    items: list[Any]
    next_cursor: str | None
    previous_cursor: str | None

    @property
    def has_other_pages(self) -> bool:
        return bool(self.next_cursor or self.previous_cursor)


def keyset_page(
    rows: QuerySet[Any] | Sequence[QuerySet[Any]], field: str, cursor: str | None, limit: int
) -> KeysetPage:
    """One page of `rows` ordered by `field` descending. `cursor` must already be validated.

    `rows` may be several querysets whose union is paged (each read by its own index, then
    merged), which keeps an OR of two indexed conditions an ordered index walk on every database.
    """
    parts = [rows] if isinstance(rows, QuerySet) else list(rows)
    if cursor and cursor[0] == "b":
        chunk = _merged(parts, {f"{field}__gt": int(cursor[1:])}, field, limit + 1, descending=False)
        has_newer = len(chunk) > limit
        items = list(reversed(chunk[:limit]))
        has_older = True
    else:
        after = {f"{field}__lt": int(cursor[1:])} if cursor else {}
        chunk = _merged(parts, after, field, limit + 1, descending=True)
        items = chunk[:limit]
        has_older = len(chunk) > limit
        has_newer = bool(cursor)
    if not items:
        return KeysetPage([], None, None)
    return KeysetPage(
        items,
        f"a{getattr(items[-1], field)}" if has_older else None,
        f"b{getattr(items[0], field)}" if has_newer else None,
    )


def _merged(parts: list[QuerySet[Any]], where: dict[str, int], field: str, count: int, descending: bool) -> list[Any]:
    order = f"-{field}" if descending else field
    if len(parts) == 1:
        return list(parts[0].filter(**where).order_by(order)[:count])
    seen: dict[Any, Any] = {}
    for part in parts:
        for row in part.filter(**where).order_by(order)[:count]:
            seen.setdefault(row.pk, row)
    return sorted(seen.values(), key=lambda row: getattr(row, field), reverse=descending)[:count]


def batches_by_pk(queryset: QuerySet[Any], batch: int = 1000) -> Iterator[list[Any]]:
    """Lists of at most `batch` rows of `queryset`, by ascending primary key (constant memory)."""
    last = 0
    while True:
        rows = list(queryset.filter(pk__gt=last).order_by("pk")[:batch])
        if not rows:
            return
        yield rows
        last = rows[-1].pk


def iter_in_batches(queryset: QuerySet[Any], batch: int = 1000) -> Iterator[Any]:
    """Rows of `queryset` by ascending primary key, fetched `batch` at a time (constant memory)."""
    for rows in batches_by_pk(queryset, batch):
        yield from rows


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of `items`, each at most `size` long."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
