"""Errors raised by memory operations. Views map them to 4xx responses."""

from __future__ import annotations


class MemoryError_(Exception):
    """Base class (named with a trailing underscore so it never shadows the builtin MemoryError)."""


class ValidationError(MemoryError_):
    """Input breaks a documented rule. `field` names the offending input where there is one."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class NotFound(MemoryError_):
    """The object does not exist in this scope (it may exist elsewhere: that is never said)."""


class PermissionDenied(MemoryError_):
    """The actor may not do this."""
