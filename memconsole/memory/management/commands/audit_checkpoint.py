from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils.translation import gettext_noop

from memconsole.memory import audit, checkpoints
from memconsole.memory.actors import Actor
from memconsole.memory.wording import said


class Command(BaseCommand):
    help = (
        "Anchor every audit chain's head in a new checkpoint now (the job worker does this every "
        "MEMCONSOLE_AUDIT_CHECKPOINT_SECONDS; for cron when no worker runs). With --reanchor, keep the "
        "database's newest checkpoint in MEMCONSOLE_AUDIT_ANCHOR again, after deliberately restoring "
        "an older backup."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reanchor",
            action="store_true",
            help="record the database's newest checkpoint in MEMCONSOLE_AUDIT_ANCHOR, replacing a newer one",
        )

    def handle(self, *args: Any, reanchor: bool = False, **options: Any) -> None:
        if reanchor:
            self._reanchor()
            return
        checkpoint = checkpoints.take()
        if checkpoint is None:
            self.stdout.write("No audit chain moved since the last checkpoint: none taken.")
            return
        self.stdout.write(f"Audit checkpoint #{checkpoint.seq} taken: {checkpoint.chains} chains anchored.")

    def _reanchor(self) -> None:
        path = checkpoints.anchor_path()
        if path is None:
            raise CommandError("MEMCONSOLE_AUDIT_ANCHOR is not set: no checkpoint is kept outside the database.")
        try:
            before = checkpoints.read_anchor(path)
        except checkpoints.AnchorError as exc:
            before = None
            self.stderr.write(f"{path} was unreadable ({exc}); it is replaced.")
        newest = checkpoints.reanchor()
        if newest is None:
            raise CommandError("The database holds no audit checkpoint yet: run this command without --reanchor.")
        with transaction.atomic():
            audit.append(
                "audit_reanchored",
                Actor.system(f"manage.py audit_checkpoint --reanchor ({getpass.getuser()})"),
                target_type="audit",
                target_id=str(newest.seq),
                summary=said(
                    gettext_noop("audit checkpoint #%(seq)s kept outside the database again (it kept #%(before)s)"),
                    seq=newest.seq,
                    before=before[0] if before else "-",
                ),
                metadata={"seq": newest.seq, "file": str(path), "replaced_seq": before[0] if before else None},
            )
        self.stdout.write(f"{path} now keeps audit checkpoint #{newest.seq}.")
