from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.memory.audit import Actor
from memconsole.memory.errors import EncryptionKeyMissing
from memconsole.memory.management.progress import StderrProgress, stderr_of
from memconsole.memory.rotation import MAX_BATCH, rotate_keys


class Command(BaseCommand):
    help = (
        "Re-encrypt every encrypted field (episodes, profiles, audit payloads, snapshots) under the newest key of "
        "MEMCONSOLE_FERNET_KEYS, and encrypt rows written before keys were set. Batched and resumable: if it is "
        "interrupted, run it again. When it reports no unreadable rows, older keys can be removed from the setting."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=500, help="rows per transaction (default 500)")

    def handle(self, *args: Any, batch: int = 500, **options: Any) -> None:
        if not 1 <= batch <= MAX_BATCH:
            raise CommandError(f"--batch must be between 1 and {MAX_BATCH}")

        try:
            with StderrProgress(stderr_of(self)) as progress:
                report = rotate_keys(batch=batch, progress=progress, actor=Actor.system("manage.py rotate_keys"))
        except (ImproperlyConfigured, EncryptionKeyMissing) as exc:  # no keys, or keys that open nothing here
            raise CommandError(str(exc)) from exc
        self.stdout.write("rotate_keys: " + report.summary())
        if report.refused:
            raise CommandError(
                f"{report.refused} rows were changed outside memconsole and were not re-sealed (see `memory_health`, "
                "check row_integrity): " + "; ".join(report.refused_rows)
            )
        if not report.ok:
            raise CommandError(
                f"{report.unreadable} rows open with no configured key and were left as they are; add the key they "
                "were written with to MEMCONSOLE_FERNET_KEYS and run rotate_keys again"
            )
