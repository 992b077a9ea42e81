"""Audit checkpoints: every chain head anchored in one chained, keyed record (memory/checkpoints.py)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class AuditCheckpoint(models.Model):
    """One checkpoint: the heads that moved since the previous one (`heads`, a JSON list of
    [chain, seq, entry_hash]), a root hash over every chain's head at this point, and a link to the
    previous checkpoint; `checkpoint_hash` (HMAC with the audit key) covers all of it."""

    seq = models.BigIntegerField(unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    heads = models.TextField()
    chains = models.PositiveIntegerField()  # how many chains the root covers
    root = models.CharField(max_length=64)
    prev_hash = models.CharField(max_length=64)
    checkpoint_hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"audit checkpoint #{self.seq} ({self.chains} chains)"


class CheckpointHead(models.Model):
    """Each chain's head as the newest checkpoint recorded it (what the next checkpoint compares
    against; a convenience, rebuilt from the checkpoints by `verify`, never trusted by it)."""

    chain = models.CharField(max_length=400, unique=True)
    seq = models.BigIntegerField()
    entry_hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"checkpointed head #{self.seq} of {self.chain or '(install)'}"
