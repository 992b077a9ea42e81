"""The usage link (issue 18): one row per episode an injection put into a prompt (memory/usage.py)."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class EpisodeUse(models.Model):
    """One episode put into one prompt: the link from an episode to the snapshot that used it."""

    snapshot = models.ForeignKey("memory.InjectionSnapshot", on_delete=models.CASCADE, related_name="uses")
    user_key = models.CharField(max_length=400)
    episode_id = models.CharField(max_length=12)
    used_at = models.DateTimeField()

    class Meta:
        verbose_name = _("episode use")
        indexes = [
            models.Index(fields=["user_key", "episode_id", "-used_at"], name="use_episode_time"),
            models.Index(fields=["user_key", "-used_at"], name="use_scope_time"),
        ]

    def __str__(self) -> str:
        return f"{self.episode_id} in {self.snapshot_id}"
