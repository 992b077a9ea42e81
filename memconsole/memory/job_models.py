"""The job tables (what runs, for whom, how far it has got, how it ended): their fields, kinds,
statuses and the one-active-job-per-scope constraint. The operations are in `jobs` (which see)."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

IMPORT, ERASURE, HEALTH, REINDEX, ROTATION, REEMBED = "import", "erasure", "health", "reindex", "rotation", "reembed"
BULK = "bulk"
KIND_LABELS = {
    IMPORT: _("Import"),
    ERASURE: _("Erasure"),
    HEALTH: _("Health check"),
    REINDEX: _("Index repair"),
    ROTATION: _("Key rotation"),
    REEMBED: _("Model re-embedding"),
    BULK: _("Bulk action"),
}
QUEUED, RUNNING, SUCCEEDED, FAILED, INTERRUPTED = "queued", "running", "succeeded", "failed", "interrupted"
STATUS_LABELS = {
    QUEUED: _("Waiting for a worker"),
    RUNNING: _("Running"),
    SUCCEEDED: _("Done"),
    FAILED: _("Failed"),
    INTERRUPTED: _("Interrupted"),
}
ACTIVE = (QUEUED, RUNNING)


class Job(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=16)  # KIND_LABELS
    scope = models.CharField(max_length=600, blank=True, help_text="what the job works on; '' = the install")
    bot_uuid = models.CharField(max_length=255, blank=True, help_text="'' = install-wide (unrestricted users)")
    status = models.CharField(max_length=16, default=QUEUED)  # STATUS_LABELS
    params = models.JSONField(default=dict)
    actor = models.JSONField(default=dict)
    stage = models.CharField(max_length=32, blank=True)
    done = models.BigIntegerField(default=0)
    total = models.BigIntegerField(null=True)
    stage_started_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True)
    finished_at = models.DateTimeField(null=True)
    heartbeat_at = models.DateTimeField(null=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    worker = models.CharField(max_length=128, blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    report = models.JSONField(null=True)
    error = models.TextField(blank=True)
    note = models.TextField(blank=True)

    class Meta:
        app_label = "memory"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "kind"], name="memory_job_status_kind")]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "scope"], condition=Q(status__in=ACTIVE), name="memory_job_one_active_per_scope"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk} ({self.status})"

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def kind_label(self) -> str:
        return str(KIND_LABELS.get(self.kind, self.kind))

    @property
    def status_label(self) -> str:
        return str(STATUS_LABELS.get(self.status, self.status))

    @property
    def percent(self) -> int | None:
        if self.status == SUCCEEDED:
            return 100
        if not self.total:
            return None
        return max(0, min(100, int(100 * self.done / self.total)))

    @property
    def eta_seconds(self) -> int | None:
        """Seconds left in the current stage at its pace so far (None before there is a pace)."""
        if self.status != RUNNING or not self.total or not self.done or self.stage_started_at is None:
            return None
        elapsed = (timezone.now() - self.stage_started_at).total_seconds()
        if elapsed <= 0:
            return None
        return max(0, int((self.total - self.done) * elapsed / self.done))

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None:
            return None
        return ((self.finished_at or timezone.now()) - self.started_at).total_seconds()

    @property
    def silent_seconds(self) -> int | None:
        """Seconds since the running job's worker last reported."""
        if self.status != RUNNING or self.heartbeat_at is None:
            return None
        return int((timezone.now() - self.heartbeat_at).total_seconds())

    @property
    def resume_command(self) -> str:
        return f"python manage.py resume_job {self.pk}"


class JobInput(models.Model):
    """An uploaded file a job reads (an import), kept in the database so that a worker on another
    machine can read it; deleted when the job ends."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, primary_key=True, related_name="input")
    name = models.CharField(max_length=255, blank=True)
    data = models.BinaryField()

    class Meta:
        app_label = "memory"

    def __str__(self) -> str:
        return f"input of job {self.job_id}"
