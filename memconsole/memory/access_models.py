"""Who may use the memory: bot API tokens and console users' bot grants; and stored health runs."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class BotToken(models.Model):
    """A bot API token. Only a SHA-256 of the secret is stored; `prefix` identifies it in lists."""

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    token_hash = models.CharField(max_length=64, unique=True)
    bot_uuids = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.CharField(max_length=255, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class BotGrant(models.Model):
    """Restricts a console user to some bots. A user with no grants sees every bot."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="bot_grants")
    bot_uuid = models.CharField(max_length=128)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "bot_uuid"], name="grant_unique")]

    def __str__(self) -> str:
        return f"{self.user} → {self.bot_uuid or '(no bot)'}"


class HealthRun(models.Model):
    """A stored health-check result: {status, checks[], checked_at, duration_ms}."""

    checked_at = models.DateTimeField(default=timezone.now, db_index=True)
    status = models.CharField(max_length=8)
    duration_ms = models.PositiveIntegerField(default=0)
    result = models.JSONField(default=dict)
    actor = models.CharField(max_length=255, blank=True)

    def __str__(self) -> str:
        return f"health {self.status} at {self.checked_at:%Y-%m-%d %H:%M}"
