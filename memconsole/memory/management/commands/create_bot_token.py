from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.memory import tokens
from memconsole.memory.audit import Actor
from memconsole.memory.errors import ValidationError


class Command(BaseCommand):
    help = "Create a bot API token for one or more bots and print it once (only its hash is stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="what the token is for, e.g. 'langbot production'")
        parser.add_argument(
            "--bot",
            action="append",
            dest="bots",
            required=True,
            metavar="BOT_UUID",
            help="a bot the token may use (repeatable)",
        )

    def handle(self, *args: Any, name: str, bots: list[str], **options: Any) -> None:
        try:
            token, secret = tokens.create_token(name, bots, Actor.system("manage.py create_bot_token"))
        except ValidationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(secret)
        self.stderr.write(
            f"Token {token.prefix} ({token.name!r}) created for {', '.join(token.bot_uuids)}. "
            "Copy it now: it is not shown again."
        )
