# Issue 20: an episode's kind (a short label) and its sealed metadata (docs/design.md §3).
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0010_jobs")]

    operations = [
        migrations.AddField(
            model_name="episode",
            name="kind",
            field=models.CharField(blank=True, default="", max_length=40),
        ),
        migrations.AddIndex(
            model_name="episode",
            index=models.Index(fields=["user_key", "kind", "-id"], name="episode_scope_kind_id"),
        ),
        migrations.CreateModel(
            name="EpisodeMetadata",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("payload_stored", models.TextField(db_column="payload", default="{}")),
                ("encrypted", models.BooleanField(default=False)),
                (
                    "episode",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="metadata_row",
                        to="memory.episode",
                    ),
                ),
            ],
        ),
    ]
