"""The model-switch tests' process (test_model_switch.py), on a file SQLite and an embedded Chroma.

Payload (stdin JSON) {"mode": ...}:
- "seed": `scopes` x `per_scope` episodes with the model of this environment;
- "switch": a thread recalls over and over while `reembed.run` re-embeds (batch `batch`), printing
  "progress done/total" lines; prints one JSON line: recalls, failures, the report;
- "check": prints one JSON line: the state, models of rows and collections, a recall.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

from django.db import connection  # noqa: E402

from memconsole.lib import vectors  # noqa: E402
from memconsole.memory import episodes, modelswitch, reembed, retrieval  # noqa: E402
from memconsole.memory.audit import Actor  # noqa: E402
from memconsole.memory.models import Episode  # noqa: E402
from memconsole.memory.scopes import derive_scope  # noqa: E402

FACTS = [
    "I am planning a trip to Beijing next month",
    "My favourite food is dumplings",
    "The meeting moved to Thursday",
]


def scopes(count: int) -> list:
    return [derive_scope("bot-a", f"group_{n}", "session") for n in range(count)]


def seed(payload: dict) -> dict:
    actor = Actor.system("tests")
    for keys in scopes(payload["scopes"]):
        for i in range(payload["per_scope"]):
            episodes.remember(keys, actor, f"{FACTS[i % len(FACTS)]} (note {i})", sender_id=f"u{i % 3}")
    return {"episodes": Episode.objects.count(), "model": modelswitch.current().model_id}


def switch(payload: dict) -> dict:
    keys = scopes(payload["scopes"])
    stop, counts, failures = threading.Event(), {"recalls": 0, "empty": 0}, []

    def recall_forever() -> None:
        try:
            while not stop.is_set():
                for k in keys:
                    try:
                        hits = retrieval.recall(k, "travel plans to Beijing", top_k=3)
                        counts["recalls"] += 1
                        counts["empty"] += not hits
                    except Exception as exc:  # every failure is reported to the test
                        failures.append(repr(exc))
        finally:
            connection.close()

    def progress(stage: str, done: int, total: int) -> None:
        print(f"progress {done}/{total} {json.dumps(modelswitch.status(modelswitch.current()))}", flush=True)

    recaller = threading.Thread(target=recall_forever, daemon=True)
    recaller.start()
    try:
        report = reembed.run(progress=progress, batch=payload.get("batch", 16), wait=True)
    finally:
        stop.set()
        recaller.join(60)
    return {**counts, "failures": failures[:5], "failure_count": len(failures), "report": report.as_dict()}


def check(payload: dict) -> dict:
    modelswitch.forget()
    state = modelswitch.current()
    keys = scopes(payload["scopes"])
    return {
        "switching": state.switching,
        "state": modelswitch.status(state),
        "episodes_done": state.episodes_done,
        "row_models": sorted(set(Episode.objects.values_list("vector_model", flat=True))),
        "collection_models": sorted({vectors.collection_model(k.user_key) or "" for k in keys}),
        "collections": sorted(vectors.list_collections()),
        "recall": [h.episode.content for h in retrieval.recall(keys[0], "a trip to Beijing next month", top_k=1)],
    }


if __name__ == "__main__":
    request = json.loads(sys.stdin.read())
    print(json.dumps({"seed": seed, "switch": switch, "check": check}[request["mode"]](request)), flush=True)
