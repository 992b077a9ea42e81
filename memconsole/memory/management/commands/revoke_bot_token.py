from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.memory import tokens
from memconsole.memory.audit import Actor


class Command(BaseCommand):
    help = "Revoke a bot API token by its prefix (see list_bot_tokens); it answers 401 from then on."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix", help="the token's prefix, e.g. 1a2b3c4d or mct_1a2b3c4d")

    def handle(self, *args: Any, prefix: str, **options: Any) -> None:
        token = tokens.find_token(prefix)
        if token is None:
            raise CommandError(f"no token with prefix {prefix!r} (see manage.py list_bot_tokens)")
        if tokens.revoke(token, Actor.system("manage.py revoke_bot_token")):
            self.stdout.write(f"Token {token.prefix} ({token.name!r}) revoked.")
        else:
            self.stdout.write(
                f"Token {token.prefix} ({token.name!r}) was already revoked on {token.revoked_at:%Y-%m-%d %H:%M}."
            )
