"""Django system checks (`manage.py check`, and every command that runs the checks)."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error
from django.db import DatabaseError

from .errors import EncryptionKeyMissing
from .install import InstallState


def check_encryption_key(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """An encrypted install without MEMCONSOLE_FERNET_KEYS is an error: it refuses to serve."""
    try:
        InstallState.require_key()
    except EncryptionKeyMissing as exc:
        return [
            Error(
                exc.message,
                hint="Set MEMCONSOLE_FERNET_KEYS (newest key first) to every key the stored data was written with.",
                id="memconsole.E001",
            )
        ]
    except DatabaseError:  # no database or no table yet (before `migrate`, image builds): nothing to check
        return []
    return []
