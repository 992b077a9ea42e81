"""The deployment's accounts (test_workers.py): an admin, a user whose password is guessed, and two
bot tokens for one bot.

Payload (stdin JSON): {"password", "bot"}. Prints {"writer": secret, "limited": secret}.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402

from memconsole.memory import tokens  # noqa: E402
from memconsole.memory.audit import Actor  # noqa: E402
from memconsole.memory.roles import ADMIN  # noqa: E402


def main() -> None:
    payload = json.loads(sys.stdin.read())
    password, bot = payload["password"], payload["bot"]
    user = User.objects.create_user("deploy-admin", password=password)
    user.groups.add(Group.objects.get(name=ADMIN))
    User.objects.create_user("deploy-guessed", password=password)
    actor = Actor.system("tests/deploy")
    print(
        json.dumps(
            {
                "writer": tokens.create_token("deploy writer", [bot], actor)[1],
                "limited": tokens.create_token("deploy rate", [bot], actor)[1],
            }
        )
    )


if __name__ == "__main__":
    main()
