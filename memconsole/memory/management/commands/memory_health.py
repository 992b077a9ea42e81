from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.memory import health
from memconsole.memory.audit import Actor


class Command(BaseCommand):
    help = (
        "Run the health check (isolation probe, index drift, audit chain, encryption) and store the result. "
        "Exit code: 0 OK, 1 WARN, 2 ERROR, for cron and monitoring."
    )

    # Django's system checks would stop the command before it runs (a missing encryption key, an
    # unreachable database) with exit 1, WARN's code, and no JSON: the health check reports those itself.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the result as JSON")
        parser.add_argument("--no-store", action="store_true", help="do not keep the result (it is still audited)")

    def handle(self, *args: Any, as_json: bool = False, no_store: bool = False, **options: Any) -> None:
        result = health.run_health_check(Actor.system("manage.py memory_health"), store=not no_store)
        if as_json:
            self.stdout.write(json.dumps(result, indent=2, ensure_ascii=False))
        else:
            for check in result["checks"]:
                self.stdout.write(f"{check['status']:<5} {check['id']:<12} {check['detail']}")
                if check.get("fix"):
                    self.stdout.write(f"{'':<18} fix: {check['fix']}")
            self.stdout.write(
                f"health: {result['status']} ({len(result['checks'])} checks in {result['duration_ms']} ms)"
            )
        code = health.EXIT_CODES[result["status"]]
        if code:
            failing = ", ".join(c["id"] for c in result["checks"] if c["status"] != health.OK)
            raise CommandError(f"health {result['status']}: {failing}", returncode=code)
