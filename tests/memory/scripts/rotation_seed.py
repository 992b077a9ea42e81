"""Fill an installation for the killed-half-way key rotation (test_rotation.py): sealed rows in every
sealed table, plus episodes written before encryption keys were configured.

Payload (stdin JSON): {"episodes": sealed episodes, "plain": episodes in clear}. Episode n reads
"episode n: ünïcödé 内容" and has the id hex_id(n), so an inspection can check every one.
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

from django.db import transaction  # noqa: E402

from memconsole.memory import audit  # noqa: E402
from memconsole.memory.audit import Actor  # noqa: E402
from memconsole.memory.scopes import derive_scope  # noqa: E402
from tests.factories import hex_id, plain_episodes, snapshots, stored_profile  # noqa: E402

CONTENT = "episode {n}: ünïcödé 内容"


def main() -> None:
    payload = json.loads(sys.stdin.read())
    sealed, plain = payload["episodes"], payload["plain"]
    keys = derive_scope("x", "group_1", "bot")
    plain_episodes(keys, sealed, content=CONTENT, episode_id=hex_id, tags=["t"])
    plain_episodes(keys, plain, content=CONTENT, start=sealed, episode_id=hex_id, tags=[], sealed=False)
    for i in range(30):
        data = {"name": f"speaker {i}", "traits": ["kind"], "preferences": [], "notes": ""}
        stored_profile(keys.scope_key, f"s{i}", data)
    snapshots(keys, 60)
    with transaction.atomic():
        for i in range(150):
            audit.append("remember", Actor.system("seed"), scope_key=keys.scope_key, summary=f"entry {i}")


if __name__ == "__main__":
    main()
