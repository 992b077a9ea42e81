# Episode.version: the optimistic-concurrency version of a console edit (`editing.edit_episode`).
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0013_embedding_state")]

    operations: list[migrations.operations.base.Operation] = [
        migrations.AddField(
            model_name="episode",
            name="version",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
