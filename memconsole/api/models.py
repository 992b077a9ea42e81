"""API bookkeeping kept in the database so that every worker process shares it."""

from __future__ import annotations

from django.db import models


class RateWindow(models.Model):
    """Requests one bot token made in one clock minute (the fixed-window rate limit, api/ratelimit.py).

    A token keeps at most a row or two: starting a new minute deletes its older windows.
    """

    token = models.ForeignKey("memory.BotToken", on_delete=models.CASCADE, related_name="rate_windows")
    window = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["token", "window"], name="rate_window_unique")]

    def __str__(self) -> str:
        return f"{self.token_id} @ {self.window:%H:%M}: {self.count}"
