# InstallState.key_check: what tells keys that open none of the install's data (memory/install.py).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0020_pending_vectors'),
    ]

    operations = [
        migrations.AddField(
            model_name='installstate',
            name='key_check',
            field=models.TextField(blank=True, default=''),
        ),
    ]
