# The model the vector index is built with, and a model switch under way (memory/reembed.py).
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0012_facts_window")]

    operations: list[migrations.operations.base.Operation] = [
        migrations.CreateModel(
            name="EmbeddingState",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("model_id", models.CharField(blank=True, default="", max_length=80)),
                ("model_name", models.CharField(blank=True, default="", max_length=80)),
                ("status", models.CharField(default="current", max_length=20)),
                ("serving_model_id", models.CharField(blank=True, default="", max_length=80)),
                ("model_dirs", models.JSONField(blank=True, default=dict)),
                ("episodes_total", models.PositiveBigIntegerField(default=0)),
                ("episodes_done", models.PositiveBigIntegerField(default=0)),
                ("scopes_total", models.PositiveIntegerField(default=0)),
                ("scopes_done", models.PositiveIntegerField(default=0)),
                ("lease_owner", models.CharField(blank=True, default="", max_length=120)),
                ("lease_expires", models.DateTimeField(blank=True, null=True)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("last_error", models.TextField(blank=True, default="")),
            ],
            options={"verbose_name": "embedding state"},
        ),
    ]
