# The erasure journal (memory/erasure_journal.py): an erasure's unfinished vector-index part.
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0007_installstate_from_encrypted_rows")]

    operations = [
        migrations.CreateModel(
            name="ErasureJournal",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("subject_digest", models.CharField(max_length=64)),
                ("bot_uuid", models.CharField(blank=True, max_length=255)),
                ("started_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("receipt_audit_id", models.CharField(blank=True, max_length=64)),
                ("user_keys", models.JSONField(default=list)),
                ("vector_ids", models.JSONField(default=list)),
                ("marked", models.JSONField(default=dict)),
                ("last_error", models.TextField(blank=True)),
            ],
            options={"verbose_name": "erasure journal"},
        ),
        migrations.AddConstraint(
            model_name="erasurejournal",
            constraint=models.UniqueConstraint(
                condition=models.Q(("finished_at__isnull", True)),
                fields=("subject_digest", "bot_uuid"),
                name="erasure_journal_one_unfinished",
            ),
        ),
    ]
