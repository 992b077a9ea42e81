from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from memconsole.memory import checkpoints


class Command(BaseCommand):
    help = (
        "Anchor every audit chain's head in a new checkpoint now (the job worker does this every "
        "MEMCONSOLE_AUDIT_CHECKPOINT_SECONDS; for cron when no worker runs)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        checkpoint = checkpoints.take()
        if checkpoint is None:
            self.stdout.write("No audit chain moved since the last checkpoint: none taken.")
            return
        self.stdout.write(f"Audit checkpoint #{checkpoint.seq} taken: {checkpoint.chains} chains anchored.")
