"""Keyset pagination on one integer column, newest first (episodes, scopes, profiles, audit
entries), and the batching helpers: the only copies of both.

Cursors: "a<n>" = the page after (older than) n, "b<n>" = the page before (newer than) n. There is
never an OFFSET and never a COUNT(*): a page costs the same on the first page as on the last.

`sorted_page` pages by another column first (event time, importance), with the id breaking ties:
its cursors are "a<value>.<id>[.<position>]", "b<value>.<id>[.<position>]" (value: an integer, a
time in microseconds since 1970, or "n" for none) and "z" (the last page). The position (how many
rows come before the page) rides in the cursor, so "26–50 of 733" needs no count either.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from django.db.models import QuerySet

from .errors import ValidationError

# ASCII digits only ("²" is a digit to isdigit), within 64 bits.
CURSOR = re.compile(r"[ab][0-9]{1,18}")
SORTED_CURSOR = re.compile(r"[ab](?:n|-?[0-9]{1,18})\.[0-9]{1,18}(?:\.[0-9]{1,9})?|z")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

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
        # Coming back from an older page there is one, but a cursor is only a number: look (one row).
        has_older = bool(items) and bool(_merged(parts, {f"{field}__lt": getattr(items[-1], field)}, field, 1, True))
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


@dataclass(frozen=True)
class SortKey:
    """A descending order on `field` (ties broken by id, newest first); `nullable` rows, which have
    no value, come after every other."""

    field: str
    is_time: bool = False
    nullable: bool = False

    def encode(self, row: Any) -> str:
        value = getattr(row, self.field)
        if value is None:
            return "n"
        if self.is_time:
            return str((value - EPOCH) // timedelta(microseconds=1))
        return str(int(value))

    def decode(self, text: str) -> Any:
        if text == "n":
            if not self.nullable:
                raise ValidationError("bad page cursor", field="cursor")
            return None
        number = int(text)
        if not self.is_time:
            return number
        try:
            return EPOCH + timedelta(microseconds=number)
        except OverflowError:
            raise ValidationError("bad page cursor", field="cursor") from None


@dataclass
class SortedPage(KeysetPage):
    """A page of `sorted_page`, with `start` (rows before it; None when unknown) and `last_cursor`."""

    start: int | None = None
    last_cursor: str | None = None


def sorted_page(rows: QuerySet[Any], key: SortKey, cursor: str | None, limit: int, total: int | None) -> SortedPage:
    """One page of `rows` ordered by `key`, then id, both descending; `cursor` already matches
    SORTED_CURSOR. `total` (the rows' exact count, None when unknown) places the last page.

    Each page reads at most three index ranges in order (the rows equal to the cursor's value, the
    rows past it, the rows without a value), each a seek on a (scope, [status|sender,] field, id)
    index with a LIMIT: never an OFFSET, on the first page as on the last.
    """
    f = key.field
    if cursor == "z":
        # The last page holds what is left after the full pages (so Previous steps back on the same
        # pages as Next does), when the total is known; else the last `limit` rows.
        size = (total % limit or limit) if total else limit
        chunk = _ranges(_ascending_parts(rows, key, None, None, start=True), size + 1)
        items = list(reversed(chunk[:size]))
        start = None if total is None else max(total - len(items), 0)
        return _sorted_result(key, items, len(chunk) > size, False, start, limit)
    if not cursor:
        parts = [rows.filter(**{f"{f}__isnull": False}).order_by(f"-{f}", "-id")] if key.nullable else []
        parts.append(
            rows.filter(**{f"{f}__isnull": True}).order_by("-id") if key.nullable else rows.order_by(f"-{f}", "-id")
        )
        chunk = _ranges(parts, limit + 1)
        return _sorted_result(key, chunk[:limit], False, len(chunk) > limit, 0, limit)
    direction, value_text, id_text, *position = cursor[0], *cursor[1:].split(".")
    value, pk = key.decode(value_text), int(id_text)
    at = int(position[0]) if position else None
    if direction == "b":
        chunk = _ranges(_ascending_parts(rows, key, value, pk), limit + 1)
        items = list(reversed(chunk[:limit]))
        has_newer = len(chunk) > limit
        start = (max(at - len(items), 0) if at is not None else None) if has_newer else 0
        return _sorted_result(key, items, has_newer, True, start, limit)
    if value is None:
        parts = [rows.filter(**{f"{f}__isnull": True}, id__lt=pk).order_by("-id")]
    else:
        parts = [] if f == "id" else [rows.filter(**{f: value}, id__lt=pk).order_by("-id")]
        parts.append(rows.filter(**{f"{f}__lt": value}).order_by(f"-{f}", "-id"))
        if key.nullable:
            parts.append(rows.filter(**{f"{f}__isnull": True}).order_by("-id"))
    chunk = _ranges(parts, limit + 1)
    return _sorted_result(key, chunk[:limit], True, len(chunk) > limit, at, limit)


def _ascending_parts(
    rows: QuerySet[Any], key: SortKey, value: Any, pk: int | None, start: bool = False
) -> list[QuerySet[Any]]:
    """The index ranges before (newer than) (value, pk), nearest first; from the very end with `start`."""
    f = key.field
    if start:
        parts = [rows.filter(**{f"{f}__isnull": True}).order_by("id")] if key.nullable else []
        parts.append(
            rows.filter(**{f"{f}__isnull": False}).order_by(f, "id") if key.nullable else rows.order_by(f, "id")
        )
        return parts
    if value is None:
        return [
            rows.filter(**{f"{f}__isnull": True}, id__gt=pk).order_by("id"),
            rows.filter(**{f"{f}__isnull": False}).order_by(f, "id"),
        ]
    parts = [] if f == "id" else [rows.filter(**{f: value}, id__gt=pk).order_by("id")]
    parts.append(rows.filter(**{f"{f}__gt": value}).order_by(f, "id"))
    return parts


def _ranges(parts: list[QuerySet[Any]], count: int) -> list[Any]:
    """The first `count` rows of the parts read one after the other (they follow each other in order)."""
    found: list[Any] = []
    for part in parts:
        found.extend(part[: count - len(found)])
        if len(found) >= count:
            break
    return found


def _sorted_result(
    key: SortKey, items: list[Any], has_newer: bool, has_older: bool, start: int | None, limit: int
) -> SortedPage:
    if not items:
        return SortedPage([], None, None, start, None)
    end = None if start is None else start + len(items)
    first = f"{key.encode(items[0])}.{items[0].pk}"
    last = f"{key.encode(items[-1])}.{items[-1].pk}"
    return SortedPage(
        items,
        (f"a{last}" + (f".{end}" if end is not None else "")) if has_older else None,
        (f"b{first}" + (f".{start}" if start is not None else "")) if has_newer else None,
        start,
        "z" if has_older else None,
    )


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
