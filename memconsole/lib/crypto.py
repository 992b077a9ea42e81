"""Encryption at rest with Fernet (MultiFernet: the first key encrypts, every key decrypts).

Keys come from MEMCONSOLE_FERNET_KEYS (comma-separated, newest first). With no keys, values are
stored as they are; the domain (`memconsole.memory.install.seal`) refuses that on an install it
has recorded as encrypted. A value stored encrypted that no configured key opens raises
`DecryptionError`, naming the setting; nothing is ever returned garbled.

Sealed format (docs/design.md §6). Format 1 is the Fernet token of the text itself. Format 2 binds
a value to the row it belongs to: the token's plaintext is `MARKER + canonical JSON of the row's
identity + "\x00" + text`, so a token copied into another row (another episode, scope or bot) is
refused on open (`RowBindingError`). Format 1 still opens (rows sealed before format 2);
`rotate_keys` re-seals them. A format-2 value opened as if it had no identity is refused too.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Sequence
from functools import cache
from json.encoder import encode_basestring_ascii as _json_string

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

SETTING = "MEMCONSOLE_FERNET_KEYS"


class DecryptionError(Exception):
    """Stored data is encrypted and no configured key opens it."""


class RowBindingError(DecryptionError):
    """The value opens, but it was sealed for another row: it was copied or the row was moved."""


# Format 2's plaintext starts with this (no text or JSON payload written before it starts with NUL).
MARKER = b"\x00mc2\x00"
Identity = Sequence[str | int]


def _identity_bytes(identity: Identity) -> bytes:
    """The identity as compact ASCII JSON (a list of strings and integers), built without an
    encoder object: it is computed for every row opened."""
    items = (_json_string(value) if isinstance(value, str) else str(int(value)) for value in identity)
    return ("[" + ",".join(items) + "]").encode("ascii")


def _envelope(text: str, identity: Identity | None) -> bytes:
    data = text.encode("utf-8")
    return data if identity is None else MARKER + _identity_bytes(identity) + b"\x00" + data


def _unwrap(plain: bytes, identity: Identity | None) -> str:
    """The text of an opened token, checking the identity it was sealed with (format 2)."""
    if not plain.startswith(MARKER):
        return plain.decode("utf-8")  # format 1: sealed before rows carried their identity
    sealed_for, sep, data = plain[len(MARKER) :].partition(b"\x00")
    if not sep:
        raise RowBindingError("its row identity is cut short (malformed)")
    if identity is None or not hmac.compare_digest(sealed_for, _identity_bytes(identity)):
        raise RowBindingError(
            f"it was sealed for another {_describe(sealed_for)}: copied into this row, or this row was moved, "
            "outside memconsole"
        )
    return data.decode("utf-8")


def _describe(sealed_for: bytes) -> str:
    """The kind of row a value was sealed for ("episode", "profile"...), never its identity."""
    try:
        kind = json.loads(sealed_for)[0]
    except (ValueError, IndexError, KeyError, TypeError):
        return "row"
    return kind.replace("_", " ") if isinstance(kind, str) else "row"


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


def seal_text(text: str, identity: Identity | None = None) -> tuple[str, bool]:
    """Return (stored value, encrypted?) for `text` under the newest key, or as is without keys.

    With `identity` (the row's identity, e.g. ("episode", episode_id, user_key)) the value is
    sealed in format 2 and opens only for that identity."""
    keys = configured_keys()
    if not keys:
        return text, False
    return keys[0].encrypt(_envelope(text, identity)).decode("ascii"), True


def _decrypt(stored: str) -> bytes:
    keys = configured_keys()
    if not keys:
        raise DecryptionError(
            f"This data is encrypted but {SETTING} is not set; configure the key it was written with."
        )
    try:
        return MultiFernet(list(keys)).decrypt(stored.encode("ascii"))
    except (InvalidToken, UnicodeError, ValueError):
        raise DecryptionError(
            f"This data is encrypted with a key that is not in {SETTING}; add the key it was written with."
        ) from None


def open_text(stored: str, encrypted: bool, identity: Identity | None = None) -> str:
    """The text of a stored value; `RowBindingError` when it was sealed (format 2) for another
    identity than `identity`. Format-1 values open whatever the identity."""
    if not encrypted:
        return stored
    plain = _decrypt(stored)
    try:
        return _unwrap(plain, identity)
    except UnicodeError:
        raise DecryptionError("This encrypted data is not text.") from None


def reseal_text(stored: str, encrypted: bool, identity: Identity) -> tuple[str, bool]:
    """Open a stored value (checking `identity` where it carries one) and seal it again under the
    newest key in format 2 (key rotation). Raises `DecryptionError` / `RowBindingError`."""
    if not configured_keys():
        raise ImproperlyConfigured(f"Key rotation needs {SETTING}.")
    return seal_text(open_text(stored, encrypted, identity), identity)


def inspect(stored: str) -> tuple[bool, int]:
    """(under the newest key?, sealed format 1 or 2) of an encrypted value; `DecryptionError` when
    no configured key opens it."""
    keys = configured_keys()
    if keys:
        try:
            return True, 2 if keys[0].decrypt(stored.encode("ascii")).startswith(MARKER) else 1
        except (InvalidToken, ValueError):
            pass
    return False, 2 if _decrypt(stored).startswith(MARKER) else 1


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
