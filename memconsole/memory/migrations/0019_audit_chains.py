# One audit chain per space (issue 22: no global write lock), anchored in chained checkpoints.
# Every existing entry stays where it is: in the install-wide chain "" with its seq and hash
# unchanged, so the single chain of earlier versions verifies as that chain's history.
from __future__ import annotations

from django.db import migrations, models
from django.utils import timezone


class Migration(migrations.Migration):
    dependencies = [("memory", "0018_episode_speaker_indexes")]

    operations = [
        migrations.AddField(
            model_name="audithead", name="chain", field=models.CharField(default="", max_length=400, unique=True)
        ),
        migrations.AddField(model_name="auditentry", name="chain", field=models.CharField(default="", max_length=400)),
        migrations.AlterField(model_name="auditentry", name="seq", field=models.BigIntegerField()),
        migrations.AddConstraint(
            model_name="auditentry",
            constraint=models.UniqueConstraint(fields=("chain", "seq"), name="audit_chain_seq"),
        ),
        migrations.RemoveIndex(model_name="auditentry", name="audit_scope_seq"),
        migrations.RemoveIndex(model_name="auditentry", name="audit_userkey_seq"),
        migrations.RemoveIndex(model_name="auditentry", name="audit_batch_seq"),
        migrations.AddIndex(
            model_name="auditentry", index=models.Index(fields=["scope_key", "-id"], name="audit_scope_id")
        ),
        migrations.AddIndex(
            model_name="auditentry", index=models.Index(fields=["user_key", "-id"], name="audit_userkey_id")
        ),
        migrations.AddIndex(
            model_name="auditentry", index=models.Index(fields=["batch_id", "id"], name="audit_batch_id")
        ),
        migrations.CreateModel(
            name="AuditCheckpoint",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("seq", models.BigIntegerField(unique=True)),
                ("created_at", models.DateTimeField(default=timezone.now)),
                ("heads", models.TextField()),
                ("chains", models.PositiveIntegerField()),
                ("root", models.CharField(max_length=64)),
                ("prev_hash", models.CharField(max_length=64)),
                ("checkpoint_hash", models.CharField(max_length=64)),
            ],
        ),
        migrations.CreateModel(
            name="CheckpointHead",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("chain", models.CharField(max_length=400, unique=True)),
                ("seq", models.BigIntegerField()),
                ("entry_hash", models.CharField(max_length=64)),
            ],
        ),
    ]
