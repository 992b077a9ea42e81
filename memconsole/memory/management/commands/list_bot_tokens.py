from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memconsole.memory.models import BotToken


class Command(BaseCommand):
    help = "List bot API tokens (prefix, name, bots, last use, state); secrets are never shown."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--active", action="store_true", help="only tokens that are not revoked")

    def handle(self, *args: Any, active: bool = False, **options: Any) -> None:
        rows = BotToken.objects.order_by("created_at")
        if active:
            rows = rows.filter(revoked_at__isnull=True)
        lines = [("PREFIX", "NAME", "BOTS", "CREATED", "LAST USED", "STATE")]
        lines.extend(
            (
                token.prefix,
                token.name,
                ",".join(token.bot_uuids),
                f"{token.created_at:%Y-%m-%d %H:%M}",
                f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "never",
                "active" if token.is_active else f"revoked {token.revoked_at:%Y-%m-%d %H:%M}",
            )
            for token in rows
        )
        widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
        for line in lines:
            self.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
        self.stdout.write(f"{len(lines) - 1} token(s)")
