"""One of several concurrent writers into the same scope (test_concurrency.py).

Payload (stdin JSON): {"index", "bot_uuid", "session_name", "isolation", "operations", "seed", "ready", "go"}.
It sets Django up and warms the model and the index, touches `ready`, waits for the file `go` (so
that every writer starts at once), then runs `operations` random memory operations on the shared
scope: remember, archive/restore/delete of its own episodes, speaker and session profile updates.
Prints what was acknowledged (the operation returned), so the test can check nothing was lost.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

from memconsole.lib import embeddings, vectors  # noqa: E402
from memconsole.memory import episodes, profiles  # noqa: E402
from memconsole.memory.audit import Actor  # noqa: E402
from memconsole.memory.scopes import derive_scope  # noqa: E402

SHARED_SPEAKER = "shared-speaker"


def main() -> None:
    job = json.loads(sys.stdin.read())
    index = job["index"]
    keys = derive_scope(job["bot_uuid"], job["session_name"], job["isolation"])
    actor = Actor.system(f"writer-{index}")
    rng = random.Random(job["seed"])
    embeddings.embed(["warm up"])
    vectors.heartbeat()
    Path(job["ready"]).touch()
    deadline = time.monotonic() + 300
    while not Path(job["go"]).exists():
        if time.monotonic() > deadline:
            raise SystemExit("never told to go")
        time.sleep(0.01)

    status: dict[str, str] = {}  # this writer's live episodes and the status it last set
    created: list[str] = []
    deleted: list[str] = []
    speaker_acks: list[int] = []
    session_acks: list[int] = []
    last_trait = None
    counts: dict[str, int] = {}
    errors: list[str] = []
    for number in range(job["operations"]):
        active = [i for i, s in status.items() if s == "active"]
        archived = [i for i, s in status.items() if s == "archived"]
        choices = ["remember"] * 4 + ["speaker", "session"]
        if active:
            choices += ["archive"] * 2 + ["delete"]
        if archived:
            choices += ["restore"] * 2
        operation = rng.choice(choices)
        try:
            if operation == "remember":
                result = episodes.remember(
                    keys,
                    actor,
                    f"writer {index} remembers fact {number}: {rng.random():.6f}",
                    sender_id=f"w{index}",
                    tags=[f"w{index}"],
                )
                status[result.episode.episode_id] = "active"
                created.append(result.episode.episode_id)
            elif operation == "archive":
                target = rng.choice(active)
                episodes.archive(keys, actor, [target])
                status[target] = "archived"
            elif operation == "restore":
                target = rng.choice(archived)
                episodes.restore(keys, actor, [target])
                status[target] = "active"
            elif operation == "delete":
                target = rng.choice(active)
                episodes.delete(keys, actor, [target])
                del status[target]
                deleted.append(target)
            elif operation == "speaker":
                trait = f"w{index}-{number}"
                row = profiles.update_profile(
                    keys,
                    actor,
                    "speaker",
                    SHARED_SPEAKER,
                    add_traits=[trait],
                    remove_traits=[last_trait] if last_trait else None,
                )
                last_trait = trait
                assert row is not None  # a trait was added: the profile exists
                speaker_acks.append(row.version)
            else:
                row = profiles.update_profile(keys, actor, "session", notes=f"writer {index} at operation {number}")
                assert row is not None
                session_acks.append(row.version)
            counts[operation] = counts.get(operation, 0) + 1
        except Exception as exc:  # reported, and the test fails on any
            errors.append(f"{operation}: {type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}")
    print(
        json.dumps(
            {
                "index": index,
                "created": created,
                "deleted": deleted,
                "status": status,
                "speaker_acks": speaker_acks,
                "session_acks": session_acks,
                "last_trait": last_trait,
                "counts": counts,
                "errors": errors,
            }
        )
    )


if __name__ == "__main__":
    main()
