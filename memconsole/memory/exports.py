"""Scope exports (DESIGN.md §7): one streamed JSON document combining the LangBot-compatible
profiles, episodes and (optionally) audit envelopes. Work in progress: see issue 5."""

from __future__ import annotations

from collections.abc import Iterator

from .audit import Actor
from .scopes import ScopeKeys

FORMAT_MARKER = "memconsole-scope-export"


def export_filename(keys: ScopeKeys) -> str:
    """A safe download file name for `keys`' export."""
    raise NotImplementedError


def stream_scope_export(
    keys: ScopeKeys, actor: Actor, *, statuses: list[str] | None = None, include_audit: bool = False
) -> Iterator[str]:
    """JSON text chunks of one scope export document, in constant memory. Audited."""
    raise NotImplementedError


def stream_audit_export(keys: ScopeKeys, actor: Actor) -> Iterator[str]:
    """JSON text chunks of the scope's audit envelope. Audited."""
    raise NotImplementedError
