# How often each memory is used (issue 18): one row per episode an injection used.
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0016_row_binding")]

    operations = [
        migrations.CreateModel(
            name="EpisodeUse",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("user_key", models.CharField(max_length=400)),
                ("episode_id", models.CharField(max_length=12)),
                ("used_at", models.DateTimeField()),
                (
                    "snapshot",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="uses",
                        to="memory.injectionsnapshot",
                    ),
                ),
            ],
            options={
                "verbose_name": "episode use",
                "indexes": [
                    models.Index(fields=["user_key", "episode_id", "-used_at"], name="use_episode_time"),
                    models.Index(fields=["user_key", "-used_at"], name="use_scope_time"),
                ],
            },
        ),
    ]
