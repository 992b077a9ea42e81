"""What this install has committed to, whatever the settings say today: once encrypted, always
encrypted (docs/design.md §6). `seal` is the one place a stored row decides plain or encrypted;
`Sealed` the one way a row's sealed column is read and written through it."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from django.apps import apps
from django.conf import settings
from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from memconsole.lib import crypto

from . import rowstate
from .errors import KEY_WRONG, EncryptionKeyMissing

identity = rowstate.identity

# The answer "not encrypted", kept for the rest of the atomic block that read it (a write that seals
# several values asks the database once, not once a value): the marker is an on_commit callback,
# live while its block is (Django drops it when the block rolls back), and the block is the same
# while the connection's savepoints are.
_plain = threading.local()


def _block() -> tuple[Any, ...]:
    return tuple(transaction.get_connection().savepoint_ids)


def _plain_in_this_block() -> bool:
    marker, block = getattr(_plain, "marker", None) or (None, None)
    connection = transaction.get_connection()
    if marker is None or not connection.in_atomic_block or block != _block():
        return False
    return id(marker) in rowstate.live_callbacks()


def _note_plain() -> None:
    if not transaction.get_connection().in_atomic_block:
        return

    def marker() -> None:
        _plain.marker = None

    transaction.on_commit(marker)
    _plain.marker = (marker, _block())


class InstallState(models.Model):
    """Singleton (pk 1): what this install has committed to, whatever the settings say today.

    `encrypted_since` is set the first time a row is sealed (or keys are seen at start) and never
    cleared: from then on, without MEMCONSOLE_FERNET_KEYS the install refuses every read and write
    (`EncryptionKeyMissing`) rather than storing personal data in plaintext (docs/design.md §6).
    """

    encrypted_since = models.DateTimeField(null=True, blank=True)
    # A public fingerprint of the audit key the chain is written with (`audit.key_id`), recorded
    # each time the health check verifies the whole chain, so that it can later say "the audit key
    # changed or is missing" rather than "the chain is broken".
    audit_key_id = models.CharField(max_length=64, blank=True, default="")
    # KEY_CHECK sealed with the newest key when the install was first encrypted, again by each key
    # rotation: keys that open none of the install's data are refused (`require_key`) before they
    # write anything under themselves.
    key_check = models.TextField(blank=True, default="")

    # Per process only the answer "encrypted" is cached, and only once a transaction that saw it
    # committed: a stale True can only refuse, never let a plaintext write through.
    _known_encrypted: ClassVar[bool] = False
    # The configured keys (as set) this process found the key check opens with: asked once per set.
    _keys_checked: ClassVar[tuple[str, ...] | None] = None

    class Meta:
        verbose_name = _("install state")

    def __str__(self) -> str:
        return f"encrypted since {self.encrypted_since:%Y-%m-%d}" if self.encrypted_since else "not encrypted"

    @classmethod
    def _remember_encrypted(cls) -> None:
        cls._known_encrypted = True

    @classmethod
    def forget_cache(cls, **signal_kwargs: Any) -> None:
        """Drop the process cache (connected to post_migrate: a flush or a migrate may empty the table)."""
        cls._known_encrypted = False
        cls._keys_checked = None

    @classmethod
    def is_encrypted(cls) -> bool:
        """True once any row was sealed or keys were configured on this database."""
        if cls._known_encrypted:
            return True
        if _plain_in_this_block():
            return False
        encrypted = cls.objects.filter(pk=1, encrypted_since__isnull=False).exists()
        if encrypted:
            transaction.on_commit(cls._remember_encrypted)
        else:
            _note_plain()
        return encrypted

    @classmethod
    def mark_encrypted(cls) -> None:
        """Record that this install is encrypted (once per process; inside the caller's transaction)."""
        if cls.is_encrypted():
            return
        cls.objects.get_or_create(pk=1)
        check, _ = crypto.seal_text(KEY_CHECK)
        cls.objects.filter(pk=1, encrypted_since__isnull=True).update(encrypted_since=timezone.now(), key_check=check)
        _plain.marker = None  # encrypted from here on, in this block too
        transaction.on_commit(cls._remember_encrypted)

    @classmethod
    def note_audit_key(cls, key_id: str) -> None:
        """Record the fingerprint of the audit key the whole chain just verified with (the health check)."""
        if not cls.objects.filter(pk=1).exclude(audit_key_id=key_id).update(audit_key_id=key_id):
            cls.objects.get_or_create(pk=1, defaults={"audit_key_id": key_id})

    @classmethod
    def recorded_audit_key(cls) -> str:
        """The fingerprint of the key the chain was written with ("" when none is recorded)."""
        return cls.objects.filter(pk=1).values_list("audit_key_id", flat=True).first() or ""

    @classmethod
    def require_key(cls, *, cached: bool = False) -> None:
        """Raise `EncryptionKeyMissing` when the install is encrypted and no key is configured, or
        when the configured keys open none of its data (`require_known_keys`).

        With `cached`, only this process's cached answer counts (no query): for a face's page views,
        once the process has seen the flag (its readiness probe, an API call, a write). Writes always
        ask the database.
        """
        if crypto.enabled():
            cls.require_known_keys()
            return
        if cls._known_encrypted if cached else cls.is_encrypted():
            raise EncryptionKeyMissing()

    @classmethod
    def require_known_keys(cls) -> None:
        """Raise `EncryptionKeyMissing` (KEY_WRONG) when the configured keys do not open the key
        check: a wrong key would otherwise seal new data that the right key cannot read. Asked once
        per process and set of keys. An install encrypted before key checks gets one now, once a
        sample of its sealed data shows the keys open it."""
        configured = tuple(settings.MEMCONSOLE_FERNET_KEYS)
        if cls._keys_checked == configured:
            return
        row = cls.objects.filter(pk=1).values_list("encrypted_since", "key_check").first()
        if row is not None and row[1]:
            try:
                crypto.open_text(row[1], True)
            except crypto.DecryptionError:
                raise EncryptionKeyMissing(KEY_WRONG) from None
        elif row is not None and row[0]:
            if not _keys_open_stored_data():
                raise EncryptionKeyMissing(KEY_WRONG)
            cls.objects.filter(pk=1, key_check="").update(key_check=crypto.seal_text(KEY_CHECK)[0])
        cls._keys_checked = configured

    @classmethod
    def reseal_key_check(cls) -> None:
        """Seal the key check again under the newest key (the end of a key rotation)."""
        cls.objects.filter(pk=1, encrypted_since__isnull=False).update(key_check=crypto.seal_text(KEY_CHECK)[0])


KEY_CHECK = "memconsole key check"
# Where an install encrypted before key checks is sampled: (model, sealed column), newest rows first.
_SAMPLED = (("AuditEntry", "payload_stored"), ("Episode", "content_stored"), ("Profile", "payload_stored"))


def _keys_open_stored_data() -> bool:
    """Whether the configured keys open the newest sealed rows of the sampled tables (True with none)."""
    for name, column in _SAMPLED:
        stored = apps.get_model("memory", name).objects.filter(encrypted=True).order_by("-pk")
        for value in stored.values_list(column, flat=True)[:3]:
            try:
                crypto.inspect(value)
            except crypto.DecryptionError:
                return False
    return True


def seal(text: str, row: models.Model | None = None) -> tuple[str, bool]:
    """(stored value, encrypted?) for a sealed field: the one place rows decide plain or encrypted.

    With keys, the install is recorded as encrypted; without, an encrypted install refuses
    (`EncryptionKeyMissing`) before anything is written. Given the `row` the value is for, the value
    is bound to the row's identity (`rowstate.IDENTITY`), and an episode or profile is noted for the
    next audit entry of the transaction, which records its after-state (`rowstate`).
    """
    InstallState.require_key()  # no key, or keys that open none of the install's data: nothing written
    stored, encrypted = crypto.seal_text(text, identity(row) if row is not None else None)
    if encrypted:
        InstallState.mark_encrypted()
    if row is not None and rowstate.is_chained(row):
        rowstate.remember_plain(row, stored, text)
        rowstate.note(row)
    return stored, encrypted


class Sealed(models.Model):
    """Abstract: a row with one sealed text column, named by `sealed_column`, beside its `encrypted`
    flag (each model declares both fields itself, where they stand in its table). `opened()` reads
    the column, bound to the row's identity (`RowBindingError` when sealed for another row);
    `seal_column()` writes it through `seal` (set the identity fields first: they are sealed in)."""

    sealed_column: ClassVar[str]

    class Meta:
        abstract = True

    def opened(self) -> str:
        return crypto.open_text(getattr(self, self.sealed_column), self.encrypted, identity(self))

    def seal_column(self, text: str) -> None:
        stored, self.encrypted = seal(text, self)
        setattr(self, self.sealed_column, stored)
