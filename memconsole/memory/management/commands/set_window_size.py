from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.memory import window
from memconsole.memory.audit import Actor
from memconsole.memory.errors import ValidationError


class Command(BaseCommand):
    help = "Set how many messages each chat of a bot keeps in its conversation window (default 20); audited."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("bot_uuid", help="the bot")
        parser.add_argument("size", type=int, help=f"1 to {window.MAX_WINDOW_SIZE} messages")

    def handle(self, *args: Any, bot_uuid: str, size: int, **options: Any) -> None:
        try:
            size = window.set_window_size(Actor.system("manage.py set_window_size"), bot_uuid, size)
        except ValidationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Conversation window of {bot_uuid}: {size} messages (each chat is cut at its next message).")
