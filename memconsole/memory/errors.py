"""Errors raised by memory operations. Faces map them: NotFound -> 404, PermissionDenied -> 403,
ValidationError -> 400/422, Conflict -> 409 (with the current version), Unavailable -> 503.

Outside systems (the vector index, the embedding model, the encryption keys) raise their own
errors in `memconsole.lib`; domain code turns them into `Unavailable` at its boundary
(`unavailable_on_failure`), so that faces never import `memconsole.lib`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from memconsole.lib import crypto, embeddings, vectors

from .wording import Said, in_language


class MemoryError_(Exception):
    """Base class (named with a trailing underscore so it never shadows the builtin MemoryError)."""


class ValidationError(MemoryError_):
    """Input breaks a documented rule. `field` names the offending input where there is one.
    `message` is English (the API's words); a `Said` message also reads `in_language()`."""

    def __init__(self, message: str | Said, field: str | None = None) -> None:
        super().__init__(str(message))
        self.message = str(message)
        self.said = message if isinstance(message, Said) else None
        self.field = field

    def in_language(self) -> str:
        """The message in the active language (the console's words), English when it has no other."""
        return in_language(self.said.stored() if self.said else None, self.message)


class NotFound(MemoryError_):
    """The object does not exist in this scope (it may exist elsewhere: that is never said)."""


class PermissionDenied(MemoryError_):
    """The actor may not do this."""


class Conflict(MemoryError_):
    """The object changed since the writer read it (`if_version` is not the stored version); nothing
    was changed. `current_version` is the version stored now."""

    def __init__(self, current_version: int, message: str = "") -> None:
        self.current_version = current_version
        self.message = message or f"it changed since it was read: the current version is {current_version}"
        super().__init__(self.message)


class Unavailable(MemoryError_):
    """An outside system (vector index, embedding model, decryption key) failed; retry or repair.

    `code` says which: "vector_index", "embedding_model", "decryption", "encryption_key_missing",
    "row_integrity" (a stored row was changed outside memconsole: `tamper`) (or "unavailable").
    """

    def __init__(self, message: str, code: str = "unavailable") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


# Each also is the lib error it stands for, so that code still catching the lib class (and the
# lib's own tests) keeps working while the faces move to `Unavailable`.
class VectorIndexUnavailable(Unavailable, vectors.VectorIndexError):
    """The vector index cannot be reached or refused an operation."""


class ModelMismatchUnavailable(VectorIndexUnavailable, vectors.ModelMismatch):
    """A collection's vectors were made by another embedding model; run `manage.py reindex`."""


class EmbeddingUnavailable(Unavailable, embeddings.EmbeddingError):
    """The embedding model cannot be loaded."""


class DecryptionUnavailable(Unavailable, crypto.DecryptionError):
    """Stored data is encrypted and no configured key opens it."""


KEY_MISSING = (
    f"This install stores encrypted data but {crypto.SETTING} is not set, so nothing is read or written "
    "(never in plaintext) until it is: configure the key(s) the data was written with and restart."
)


KEY_WRONG = (
    f"None of the keys in {crypto.SETTING} opens this install's encrypted data, so nothing is read or written "
    "(never under a key that cannot read the rest) until they do: configure the key(s) the data was written "
    "with, newest first, and restart."
)


class EncryptionKeyMissing(Unavailable):
    """The install is encrypted (`InstallState`) and no key that opens it is configured (none, or
    wrong ones: KEY_WRONG): refuse every read and write."""

    def __init__(self, message: str = KEY_MISSING) -> None:
        super().__init__(message, "encryption_key_missing")


def unavailable(exc: Exception) -> Unavailable:
    """The domain error for a lib error (an `Unavailable` is returned as it is)."""
    if isinstance(exc, Unavailable):
        return exc
    if isinstance(exc, vectors.ModelMismatch):
        return ModelMismatchUnavailable(str(exc), "vector_index")
    if isinstance(exc, vectors.VectorIndexError):
        return VectorIndexUnavailable(str(exc), "vector_index")
    if isinstance(exc, embeddings.EmbeddingError):
        return EmbeddingUnavailable(str(exc), "embedding_model")
    if isinstance(exc, crypto.RowBindingError):  # sealed for another row: changed outside memconsole
        return DecryptionUnavailable(f"a stored row was changed outside memconsole: {exc}", "row_integrity")
    if isinstance(exc, crypto.DecryptionError):
        return DecryptionUnavailable(str(exc), "decryption")
    return Unavailable(str(exc))


OUTSIDE_FAILURES = (vectors.VectorIndexError, embeddings.EmbeddingError, crypto.DecryptionError)


@contextmanager
def unavailable_on_failure() -> Iterator[None]:
    """Raise `Unavailable` (with the lib error as `__cause__`) for an outside system's failure."""
    try:
        yield
    except Unavailable:
        raise
    except OUTSIDE_FAILURES as exc:
        raise unavailable(exc) from exc
