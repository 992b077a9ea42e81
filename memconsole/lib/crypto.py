"""Encryption at rest with Fernet (MultiFernet: the first key encrypts, every key decrypts).

Keys come from MEMCONSOLE_FERNET_KEYS (comma-separated, newest first). With no keys, values are
stored as they are; the domain (`memconsole.memory.install.seal`) refuses that on an install it
has recorded as encrypted. A value stored encrypted that no configured key opens raises
`DecryptionError`, naming the setting; nothing is ever returned garbled.
"""

from __future__ import annotations

from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

SETTING = "MEMCONSOLE_FERNET_KEYS"


class DecryptionError(Exception):
    """Stored data is encrypted and no configured key opens it."""


@cache
def _keys(raw: tuple[str, ...]) -> tuple[Fernet, ...]:
    fernets = []
    for position, key in enumerate(raw, start=1):
        try:
            fernets.append(Fernet(key.encode()))
        except (ValueError, TypeError):
            raise ImproperlyConfigured(
                f"{SETTING}: key #{position} is not a Fernet key (32 url-safe base64-encoded bytes; "
                "make one with `python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`)"
            ) from None
    return tuple(fernets)


def configured_keys() -> tuple[Fernet, ...]:
    return _keys(tuple(settings.MEMCONSOLE_FERNET_KEYS))


def enabled() -> bool:
    return bool(settings.MEMCONSOLE_FERNET_KEYS)


def seal_text(text: str) -> tuple[str, bool]:
    """Return (stored value, encrypted?) for `text` under the newest key, or as is without keys."""
    keys = configured_keys()
    if not keys:
        return text, False
    return keys[0].encrypt(text.encode("utf-8")).decode("ascii"), True


def open_text(stored: str, encrypted: bool) -> str:
    if not encrypted:
        return stored
    keys = configured_keys()
    if not keys:
        raise DecryptionError(
            f"This data is encrypted but {SETTING} is not set; configure the key it was written with."
        )
    try:
        return MultiFernet(list(keys)).decrypt(stored.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError, ValueError):
        raise DecryptionError(
            f"This data is encrypted with a key that is not in {SETTING}; add the key it was written with."
        ) from None


def is_under_newest_key(stored: str) -> bool:
    """True when `stored` (a Fernet token) opens with the newest configured key."""
    keys = configured_keys()
    if not keys:
        return False
    try:
        keys[0].decrypt(stored.encode("ascii"))
    except (InvalidToken, ValueError):
        return False
    return True


def rotate_text(stored: str, encrypted: bool) -> tuple[str, bool]:
    """Re-encrypt a stored value under the newest key (or encrypt a plain one)."""
    keys = configured_keys()
    if not keys:
        raise ImproperlyConfigured(f"Key rotation needs {SETTING}.")
    if not encrypted:
        return seal_text(stored)
    try:
        return MultiFernet(list(keys)).rotate(stored.encode("ascii")).decode("ascii"), True
    except (InvalidToken, UnicodeError, ValueError):
        raise DecryptionError(
            f"This data is encrypted with a key that is not in {SETTING}; add the key it was written with."
        ) from None


def decrypt_with_key(token: bytes | str, key: str) -> str:
    """Open a Fernet token made elsewhere (imports) with an explicitly given key.

    Raises `ImproperlyConfigured` for a malformed key and `DecryptionError` when the key does not
    open the token.
    """
    try:
        fernet = Fernet(key.encode() if isinstance(key, str) else key)
    except (ValueError, TypeError):
        raise ImproperlyConfigured("the Fernet key is not valid (32 url-safe base64-encoded bytes)") from None
    if isinstance(token, str):
        token = token.encode("ascii", errors="replace")
    try:
        return fernet.decrypt(token).decode("utf-8")
    except (InvalidToken, UnicodeError, ValueError):
        raise DecryptionError("the given Fernet key does not open this value") from None
