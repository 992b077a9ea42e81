"""Imports (issue 5): memconsole, langbot, jw-agents and bot-memory files into a target scope.
Work in progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .audit import Actor

FORMATS = ("memconsole", "langbot", "jw-agents", "bot-memory")


@dataclass
class ImportReport:
    format: str
    dry_run: bool
    scopes: dict[str, dict[str, Any]] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    episodes: int = 0
    profiles: int = 0
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    indexed: int = 0
    not_indexed: int = 0

    def as_dict(self) -> dict[str, Any]:
        raise NotImplementedError


def import_file(
    path: Any,
    fmt: str,
    *,
    bot_uuid: str,
    session_name: str | None = None,
    isolation: str = "session",
    actor: Actor,
    dry_run: bool = False,
    fernet_key: str | None = None,
    include_messages: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> ImportReport:
    """Import one file atomically into the target scope(s)."""
    raise NotImplementedError


def import_upload(uploaded_file: Any, fmt: str, **kwargs: Any) -> ImportReport:
    """`import_file` for a Django UploadedFile (written to a private temp file first)."""
    raise NotImplementedError
