# Issue 20: keyed facts (with their history), the conversation window and the per-bot window size.
import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0011_episode_kind_metadata")]

    operations = [
        migrations.CreateModel(
            name="BotMemorySettings",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("bot_uuid", models.CharField(max_length=128, unique=True)),
                ("window_size", models.PositiveIntegerField(default=20)),
                ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
        ),
        migrations.CreateModel(
            name="Fact",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("text_stored", models.TextField(db_column="text", default="")),
                ("encrypted", models.BooleanField(default=False)),
                ("user_key", models.CharField(max_length=400)),
                ("scope_key", models.CharField(max_length=400)),
                ("bot_uuid", models.CharField(blank=True, max_length=128)),
                ("subject", models.CharField(max_length=255)),
                ("key", models.CharField(max_length=255)),
                ("version", models.PositiveIntegerField(default=1)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["subject"], name="fact_subject"),
                    models.Index(fields=["bot_uuid"], name="fact_bot"),
                ],
                "constraints": [models.UniqueConstraint(fields=("user_key", "subject", "key"), name="fact_unique_key")],
            },
        ),
        migrations.CreateModel(
            name="WindowMessage",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("text_stored", models.TextField(db_column="text", default="")),
                ("encrypted", models.BooleanField(default=False)),
                ("scope_key", models.CharField(max_length=400)),
                ("user_key", models.CharField(max_length=400)),
                ("bot_uuid", models.CharField(blank=True, max_length=128)),
                ("role", models.CharField(max_length=32)),
                ("sender_id", models.CharField(blank=True, max_length=255)),
                ("sender_name", models.CharField(blank=True, max_length=255)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["scope_key", "-id"], name="window_scope_id"),
                    models.Index(fields=["sender_id"], name="window_sender"),
                    models.Index(fields=["created_at"], name="window_created"),
                ],
            },
        ),
        migrations.CreateModel(
            name="FactVersion",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("text_stored", models.TextField(db_column="text", default="")),
                ("encrypted", models.BooleanField(default=False)),
                ("version", models.PositiveIntegerField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("actor", models.CharField(blank=True, max_length=255)),
                (
                    "fact",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="versions", to="memory.fact"
                    ),
                ),
            ],
            options={
                "ordering": ["-version"],
                "constraints": [models.UniqueConstraint(fields=("fact", "version"), name="fact_version_unique")],
            },
        ),
    ]
