# A speaker's filtered count from the index alone, and a speaker's page sorted by importance
# (issue 22: sorting and counts at a million rows; docs/benchmarks.md).
from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0017_episode_use")]

    operations = [
        migrations.AddIndex(
            model_name="episode",
            index=models.Index(fields=["user_key", "sender_id", "status"], name="episode_scope_sender_status"),
        ),
        migrations.AddIndex(
            model_name="episode",
            index=models.Index(fields=["user_key", "sender_id", "-importance", "-id"], name="episode_scope_sender_imp"),
        ),
    ]
