"""The tables of the bot-memory plan (issue 20; docs/design.md §3): keyed facts, their history, the
conversation window and the per-bot window size. Their operations are `facts.py` and `window.py`.

Values and message contents are sealed like episode content (`install.Sealed`). Named here and
imported by models.py (which this module cannot import).
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from .install import Sealed

MAX_SUBJECT_CHARS = 255
MAX_FACT_KEY_CHARS = 255
MAX_ROLE_CHARS = 32
DEFAULT_WINDOW_SIZE = 20  # the plan's max_context_messages


class SealedText(Sealed):
    """Abstract: one text column stored plain or Fernet-encrypted."""

    text_stored = models.TextField(db_column="text", default="")
    encrypted = models.BooleanField(default=False)
    sealed_column = "text_stored"

    class Meta:
        abstract = True

    @property
    def text(self) -> str:
        return self.opened()

    def set_text(self, value: str) -> None:
        self.seal_column(value)


class Fact(SealedText):
    """One current fact: `value` (the sealed text) of (`user_key`, `subject`, `key`); every earlier
    value is a `FactVersion`. `scope_key` is the chat that last wrote it."""

    user_key = models.CharField(max_length=400)
    scope_key = models.CharField(max_length=400)
    bot_uuid = models.CharField(max_length=128, blank=True)
    subject = models.CharField(max_length=MAX_SUBJECT_CHARS)
    key = models.CharField(max_length=MAX_FACT_KEY_CHARS)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user_key", "subject", "key"], name="fact_unique_key")]
        indexes = [
            models.Index(fields=["subject"], name="fact_subject"),
            models.Index(fields=["bot_uuid"], name="fact_bot"),
        ]

    def __str__(self) -> str:
        return f"fact {self.subject}/{self.key} in {self.user_key} (v{self.version})"


class FactVersion(SealedText):
    """An earlier value of a fact (its history), kept until the fact is forgotten or erased."""

    fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    actor = models.CharField(max_length=255, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["fact", "version"], name="fact_version_unique")]
        ordering = ["-version"]

    def __str__(self) -> str:
        return f"v{self.version} of fact #{self.fact_id}"


class WindowMessage(SealedText):
    """One message of a chat's conversation window (the sealed text is its content)."""

    scope_key = models.CharField(max_length=400)
    user_key = models.CharField(max_length=400)
    bot_uuid = models.CharField(max_length=128, blank=True)
    role = models.CharField(max_length=MAX_ROLE_CHARS)
    sender_id = models.CharField(max_length=255, blank=True)
    sender_name = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["scope_key", "-id"], name="window_scope_id"),
            models.Index(fields=["sender_id"], name="window_sender"),
            models.Index(fields=["created_at"], name="window_created"),
        ]

    def __str__(self) -> str:
        return f"{self.role} message in {self.scope_key}"


class BotMemorySettings(models.Model):
    """Per-bot settings of the bot-memory plan: how many messages a chat's window keeps."""

    bot_uuid = models.CharField(max_length=128, unique=True)
    window_size = models.PositiveIntegerField(default=DEFAULT_WINDOW_SIZE)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.bot_uuid}: window of {self.window_size}"
