# Background jobs (issue 21): memory/job_models.py, operations in memory/jobs.py.
import uuid

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0009_lexical_index")]

    operations = [
        migrations.CreateModel(
            name="Job",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ("kind", models.CharField(max_length=16)),
                (
                    "scope",
                    models.CharField(blank=True, help_text="what the job works on; '' = the install", max_length=600),
                ),
                (
                    "bot_uuid",
                    models.CharField(blank=True, help_text="'' = install-wide (unrestricted users)", max_length=255),
                ),
                ("status", models.CharField(default="queued", max_length=16)),
                ("params", models.JSONField(default=dict)),
                ("actor", models.JSONField(default=dict)),
                ("stage", models.CharField(blank=True, max_length=32)),
                ("done", models.BigIntegerField(default=0)),
                ("total", models.BigIntegerField(null=True)),
                ("stage_started_at", models.DateTimeField(null=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("started_at", models.DateTimeField(null=True)),
                ("finished_at", models.DateTimeField(null=True)),
                ("heartbeat_at", models.DateTimeField(null=True)),
                ("attempts", models.PositiveSmallIntegerField(default=0)),
                ("worker", models.CharField(blank=True, max_length=128)),
                ("task_id", models.CharField(blank=True, max_length=64)),
                ("report", models.JSONField(null=True)),
                ("error", models.TextField(blank=True)),
                ("note", models.TextField(blank=True)),
            ],
            options={"ordering": ["-created_at"]},
        ),
        migrations.CreateModel(
            name="JobInput",
            fields=[
                (
                    "job",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="input",
                        serialize=False,
                        to="memory.job",
                    ),
                ),
                ("name", models.CharField(blank=True, max_length=255)),
                ("data", models.BinaryField()),
            ],
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["status", "kind"], name="memory_job_status_kind"),
        ),
        migrations.AddConstraint(
            model_name="job",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status__in", ("queued", "running"))),
                fields=("kind", "scope"),
                name="memory_job_one_active_per_scope",
            ),
        ),
    ]
