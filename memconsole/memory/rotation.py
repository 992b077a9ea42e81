"""Fernet key rotation for every encrypted field. Work in progress."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def rotate_keys(batch: int = 500, progress: Callable[[str], None] | None = None) -> Any:
    raise NotImplementedError
