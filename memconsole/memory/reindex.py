"""Repair or report drift between the database and the vector index. Work in progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class ReindexReport:
    check_only: bool

    def as_dict(self) -> dict[str, Any]:
        return {"check_only": self.check_only}


def reindex(check_only: bool, progress: Callable[[str], None] | None = None) -> ReindexReport:
    raise NotImplementedError
