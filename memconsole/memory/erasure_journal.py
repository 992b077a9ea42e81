"""The erasure journal (docs/design.md §6): what an erasure still has to purge from the vector index.

An erasure commits its database part in one transaction, and in that same transaction writes its
journal row: the vector collections (by user_key) that held the person's vectors and the ids of
those vectors. The vector part runs after the commit and can be killed half way; the row stays
unfinished until every listed collection is rebuilt and the index compacted, so running the same
erasure again (or `manage.py erase_subject --resume`) finishes it, and the health check reports
it as ERROR until then. The row names the person only by the keyed digest of the receipt; once
finished, its lists are emptied (`erasure_index.finish`).
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class ErasureJournal(models.Model):
    subject_digest = models.CharField(max_length=64)
    bot_uuid = models.CharField(max_length=255, blank=True)  # '' = every bot
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    receipt_audit_id = models.CharField(max_length=64, blank=True)
    # Still to purge: user_keys whose collection is not rebuilt yet, and the vector ids to delete first.
    user_keys = models.JSONField(default=list)
    vector_ids = models.JSONField(default=list)
    # {user_key: [episode pks]}: rows marked not current before their collection's rebuild, to mark
    # current again after it (also after a kill, by the run that resumes).
    marked = models.JSONField(default=dict)
    last_error = models.TextField(blank=True)

    class Meta:
        verbose_name = _("erasure journal")
        constraints = [
            models.UniqueConstraint(
                fields=["subject_digest", "bot_uuid"],
                condition=models.Q(finished_at__isnull=True),
                name="erasure_journal_one_unfinished",
            )
        ]

    def __str__(self) -> str:
        state = f"finished {self.finished_at:%Y-%m-%d %H:%M}" if self.finished_at else "unfinished"
        return f"erasure {self.subject_digest[:12]} ({state})"

    def describe(self) -> dict[str, Any]:
        """What the health check and the console show of an unfinished erasure (no personal data)."""
        return {
            "subject_digest": self.subject_digest,
            "bot_uuid": self.bot_uuid or "*",
            "started_at": self.started_at.isoformat(),
            "collections_left": len(self.user_keys),
            "receipt_audit_id": self.receipt_audit_id,
            "last_error": self.last_error,
        }
