from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.memory.audit import Actor
from memconsole.memory.errors import Unavailable
from memconsole.memory.management.progress import StderrProgress, stderr_of
from memconsole.memory.reindex import reindex


class Command(BaseCommand):
    help = (
        "Repair the vector index from the database: index episodes whose vector is missing or not current, "
        "fix stale vector metadata, remove orphan vectors and collections, re-embed collections made by another "
        "model. With --check, only report (exit 1 when there is drift)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--check", action="store_true", help="report drift without changing anything")

    def handle(self, *args: Any, check: bool = False, **options: Any) -> None:
        try:
            with StderrProgress(stderr_of(self), every=1.0) as progress:
                report = reindex(check_only=check, progress=progress, actor=Actor.system("manage.py reindex"))
        except Unavailable as exc:
            raise CommandError(f"reindex failed: {exc}") from exc
        self.stdout.write(("reindex --check: " if check else "reindex: ") + report.summary())
        if report.errors:
            for error in report.errors[:20]:
                self.stderr.write(f"error: {error}")
            raise CommandError(f"{len(report.errors)} repairs failed; run `python manage.py reindex` again")
        if check and report.drift:
            raise CommandError(f"drift found: {report.describe_drift()}; run `python manage.py reindex` to repair it")
