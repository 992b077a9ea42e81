"""Keyset pagination on one integer column, newest first: episodes, scopes, profiles, audit entries.

Cursors: "a<n>" = the page after (older than) n, "b<n>" = the page before (newer than) n. There is
never an OFFSET and never a COUNT(*): a page costs the same on the first page as on the last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet


@dataclass
class KeysetPage:
    items: list[Any]
    next_cursor: str | None
    previous_cursor: str | None

    @property
    def has_other_pages(self) -> bool:
        return bool(self.next_cursor or self.previous_cursor)


def keyset_page(rows: QuerySet | Sequence[QuerySet], field: str, cursor: str | None, limit: int) -> KeysetPage:
    """One page of `rows` ordered by `field` descending. `cursor` must already be validated.

    `rows` may be several querysets whose union is paged (each read by its own index, then
    merged), which keeps an OR of two indexed conditions an ordered index walk on every database.
    """
    parts = [rows] if isinstance(rows, QuerySet) else list(rows)
    newer = bool(cursor) and cursor[0] == "b"
    if newer:
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


def _merged(parts: list[QuerySet], where: dict[str, int], field: str, count: int, descending: bool) -> list[Any]:
    order = f"-{field}" if descending else field
    if len(parts) == 1:
        return list(parts[0].filter(**where).order_by(order)[:count])
    seen: dict[Any, Any] = {}
    for part in parts:
        for row in part.filter(**where).order_by(order)[:count]:
            seen.setdefault(row.pk, row)
    return sorted(seen.values(), key=lambda row: getattr(row, field), reverse=descending)[:count]
