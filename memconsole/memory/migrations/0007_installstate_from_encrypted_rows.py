"""An install upgraded with encrypted rows already in it is recorded as encrypted (issue 15), so that
starting it without MEMCONSOLE_FERNET_KEYS refuses to run instead of writing plaintext."""

from django.db import migrations
from django.utils import timezone

SEALED_MODELS = ("Episode", "Profile", "ProfileVersion", "AuditEntry", "InjectionSnapshot")


def record_encrypted_install(apps, schema_editor):
    InstallState = apps.get_model("memory", "InstallState")
    alias = schema_editor.connection.alias
    encrypted = any(
        apps.get_model("memory", name).objects.using(alias).filter(encrypted=True).exists() for name in SEALED_MODELS
    )
    since = timezone.now() if encrypted else None
    InstallState.objects.using(alias).get_or_create(pk=1, defaults={"encrypted_since": since})


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0006_installstate"),
    ]

    operations = [
        migrations.RunPython(record_encrypted_install, migrations.RunPython.noop),
    ]
