"""Fill an installation for a crash scenario. JSON payload on stdin:

    {"kind": "reindex", "plain": 768}    rows without vectors in three scopes, plus a few indexed
                                         episodes whose vectors then drift (stale metadata, orphans)
    {"kind": "rotation", "episodes": 3000, "plain": 40}
                                         sealed rows under the current key in every sealed table,
                                         rows written before keys were set, a few indexed episodes
Prints {"episodes": n, ...} as its last line.
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

from memconsole.lib import vectors  # noqa: E402
from memconsole.memory import audit, counters  # noqa: E402
from memconsole.memory.audit import Actor  # noqa: E402
from memconsole.memory.episodes import remember  # noqa: E402
from memconsole.memory.models import Episode  # noqa: E402
from memconsole.memory.reindex import reindex  # noqa: E402
from memconsole.memory.scopes import derive_scope, register_scope  # noqa: E402
from tests.factories import snapshots, stored_profile  # noqa: E402

SYSTEM = Actor.system("reliability seed")
BOT = "crash-bot"


def plain_rows(keys, count: int, start: int, encrypted_content: bool = True) -> None:
    rows = []
    for i in range(start, start + count):
        episode = Episode(
            episode_id=f"{i:012x}",
            user_key=keys.user_key,
            scope_key=keys.scope_key,
            tags=["seed"],
            tags_text=",seed,",
            sender_id=f"u{i % 7}",
            bot_uuid=keys.bot_uuid,
        )
        if encrypted_content:
            episode.set_content(f"seeded episode {i}: ünïcödé 内容")
        else:  # a row written before encryption keys were configured
            episode.content_stored, episode.encrypted = f"seeded episode {i}: ünïcödé 内容", False
        rows.append(episode)
    Episode.objects.bulk_create(rows, batch_size=500)
    counters.recount(keys.user_key)


def seed_reindex(plain: int) -> dict:
    scopes = [derive_scope(BOT, f"group_{n}", "session") for n in range(3)]
    for keys in scopes:
        register_scope(keys)
    for n, keys in enumerate(scopes):
        plain_rows(keys, plain // len(scopes), n * plain)
    indexed = [remember(scopes[0], SYSTEM, f"indexed fact number {i}", tags=["indexed"]).episode for i in range(12)]
    # Drift: stale metadata (the index changed behind the database's back: a row changed by SQL is
    # a forgery, which reindex refuses) and orphans (rows gone).
    stale = [e.episode_id for e in indexed[:4]]
    vectors.update_metadata(scopes[0].user_key, stale, [{"status": "archived", "importance": 5}] * len(stale))
    Episode.objects.filter(pk__in=[e.pk for e in indexed[4:7]]).delete()
    counters.recount(scopes[0].user_key)
    return {"episodes": Episode.objects.count()}


def seed_rotation(episodes: int, plain: int) -> dict:
    keys = derive_scope(BOT, "group_rotation", "bot")
    register_scope(keys)
    plain_rows(keys, episodes, 0)
    plain_rows(keys, plain, episodes, encrypted_content=False)
    for i in range(8):
        remember(keys, SYSTEM, f"an indexed memory {i} about the trip to Beijing", tags=["travel"], sender_id="u1")
    for i in range(30):
        data = {"name": f"speaker {i}", "traits": ["kind"], "preferences": [], "notes": ""}
        stored_profile(keys.scope_key, f"s{i}", data)
    snapshots(keys, 60)
    with transaction.atomic():
        for i in range(200):
            audit.append(
                "remember", SYSTEM, scope_key=keys.scope_key, user_key=keys.user_key, summary=f"seeded entry {i}"
            )
    counters.recount(keys.user_key)
    report = reindex(check_only=False)  # every row indexed: the rotation scenario starts without drift
    return {"episodes": Episode.objects.count(), "indexed": report.reembedded}


def main() -> None:
    payload = json.loads(sys.stdin.read() or "{}")
    if payload["kind"] == "reindex":
        result = seed_reindex(payload.get("plain", 768))
    else:
        result = seed_rotation(payload.get("episodes", 3000), payload.get("plain", 40))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
