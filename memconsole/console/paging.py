"""Keyset pagination on one integer column, newest first, as `operations.list_episodes` does it.

Cursors: "a<n>" = the page after (older than) n, "b<n>" = the page before (newer than) n. There is
never an OFFSET and never a COUNT(*): a page costs the same on the first page as on the last.
"""

from __future__ import annotations

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


def keyset_page(rows: QuerySet, field: str, cursor: str | None, limit: int) -> KeysetPage:
    """One page of `rows` ordered by `field` descending. `cursor` must already be validated."""
    if cursor and cursor[0] == "b":
        chunk = list(rows.filter(**{f"{field}__gt": int(cursor[1:])}).order_by(field)[: limit + 1])
        has_newer = len(chunk) > limit
        items = list(reversed(chunk[:limit]))
        has_older = True
    else:
        if cursor:
            rows = rows.filter(**{f"{field}__lt": int(cursor[1:])})
        chunk = list(rows.order_by(f"-{field}")[: limit + 1])
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
