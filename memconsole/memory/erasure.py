"""Erasure of one person (issue 5). Work in progress."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .audit import Actor


@dataclass
class ErasureReport:
    dry_run: bool
    episodes: int = 0
    profiles: int = 0
    profile_versions: int = 0
    snapshots_deleted: int = 0
    snapshots_redacted: int = 0
    audit_redacted: int = 0
    collections_rebuilt: int = 0

    def as_dict(self) -> dict[str, Any]:
        raise NotImplementedError


def erase_subject(sender_id: str, *, bot_uuid: str | None = None, actor: Actor, dry_run: bool = False) -> ErasureReport:
    """Remove every trace of one person (see module docstring)."""
    raise NotImplementedError
