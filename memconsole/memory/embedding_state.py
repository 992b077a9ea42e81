"""`EmbeddingState`: the model the vector index is built with, and a model switch under way
(modelswitch.py decides what serves, reembed.py re-embeds)."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

CURRENT = "current"
REEMBEDDING = "reembedding"


class EmbeddingState(models.Model):
    """Singleton (pk 1): the model the vector index is built with, and a switch under way."""

    model_id = models.CharField(max_length=80, blank=True, default="")  # built (current) or being built
    model_name = models.CharField(max_length=80, blank=True, default="")
    status = models.CharField(max_length=20, default=CURRENT)  # "current" | "reembedding"
    serving_model_id = models.CharField(max_length=80, blank=True, default="")  # the earlier model, while it serves
    model_dirs = models.JSONField(default=dict, blank=True)  # {model id: folder it was loaded from}
    episodes_total = models.PositiveBigIntegerField(default=0)
    episodes_done = models.PositiveBigIntegerField(default=0)
    scopes_total = models.PositiveIntegerField(default=0)
    scopes_done = models.PositiveIntegerField(default=0)
    lease_owner = models.CharField(max_length=120, blank=True, default="")
    lease_expires = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        verbose_name = _("embedding state")

    def __str__(self) -> str:
        return f"{self.model_id} ({self.status})"

    @property
    def switching(self) -> bool:
        return self.status == REEMBEDDING

    @property
    def percent(self) -> int:
        if not self.switching:
            return 100
        return min(99, 100 * self.episodes_done // self.episodes_total) if self.episodes_total else 0
