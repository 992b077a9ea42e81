# Row binding (issue 15, docs/design.md §6): each audit entry records the after-state digests of
# the rows it changed; the install records the fingerprint of the audit key the chain is written with.
from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0015_audit_batch")]

    operations = [
        migrations.AddField(
            model_name="auditentry",
            name="row_states",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="installstate",
            name="audit_key_id",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
    ]
