from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.memory.demo import DemoNotEmpty, load_demo


class Command(BaseCommand):
    help = (
        "Load a demo workspace (3 bots, 15 sessions, ~2,000 episodes by 32 people in English, Chinese and Spanish, "
        "profiles, snapshots). Refuses a non-empty database unless --force."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--force", action="store_true", help="add the demo data even if memory already exists")

    def handle(self, *args: Any, force: bool = False, **options: Any) -> None:
        try:
            totals = load_demo(force=force, progress=lambda line: self.stdout.write(f"  {line}"))
        except DemoNotEmpty as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo loaded: {totals['scopes']} scopes, {totals['episodes']} episodes, "
                f"{totals['profiles']} profiles, {totals['snapshots']} injection snapshots."
            )
        )
