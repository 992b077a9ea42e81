"""The write-behind indexer's queue (memory/pending.py): one row per episode whose vector is known
but not yet in the vector index, committed in the same transaction as the episode itself."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class PendingVector(models.Model):
    """An episode's vector (float32 bytes, made by `model_id`), waiting for the indexer. Deleting
    the episode deletes it (CASCADE), so an erased or deleted episode's vector is never written."""

    episode = models.OneToOneField("memory.Episode", on_delete=models.CASCADE, related_name="pending_vector")
    user_key = models.CharField(max_length=400)
    model_id = models.CharField(max_length=80)
    vector = models.BinaryField()
    # The episode's `version` the vector was made from: an edit since makes it stale (embedded again).
    version = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["user_key", "id"], name="pending_scope_id")]

    def __str__(self) -> str:
        return f"pending vector of episode {self.episode_id}"
