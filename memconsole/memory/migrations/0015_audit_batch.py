# The console list's sort orders (event time, importance) and the audit entries' batch id (issue 17).
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0014_episode_version")]

    operations = [
        migrations.AddIndex(
            model_name="episode",
            index=models.Index(fields=["user_key", "status", "-timestamp", "-id"], name="episode_scope_status_time"),
        ),
        migrations.AddIndex(
            model_name="episode",
            index=models.Index(fields=["user_key", "-timestamp", "-id"], name="episode_scope_time"),
        ),
        migrations.AddIndex(
            model_name="episode",
            index=models.Index(fields=["user_key", "sender_id", "-timestamp", "-id"], name="episode_scope_sender_time"),
        ),
        migrations.AddIndex(
            model_name="episode",
            index=models.Index(fields=["user_key", "status", "-importance", "-id"], name="episode_scope_status_imp"),
        ),
        migrations.AddIndex(
            model_name="episode",
            index=models.Index(fields=["user_key", "-importance", "-id"], name="episode_scope_imp"),
        ),
        migrations.AddField(
            model_name="auditentry",
            name="batch_id",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.AddIndex(
            model_name="auditentry",
            index=models.Index(fields=["batch_id", "seq"], name="audit_batch_seq"),
        ),
    ]
