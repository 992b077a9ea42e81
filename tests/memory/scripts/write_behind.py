"""The write-behind crash test's two processes (tests/memory/test_write_behind_crash.py).

`{"role": "writer", "count": N}`: remember N episodes one after another, printing `ack <id>` after
each returned (the parent kills this process with SIGKILL part way). `{"role": "restart", "acked":
[...]}`: what a restarted server does (its indexer thread drains the backlog); prints one JSON line:
what was pending at the start, whether each acknowledged episode is stored and was recalled before
the drain, and after it the index, the drift and the audit chain."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

from memconsole.jobs.worker import start_in_web  # noqa: E402
from memconsole.lib import vectors  # noqa: E402
from memconsole.memory import audit, episodes, indexer, retrieval  # noqa: E402
from memconsole.memory.audit import Actor  # noqa: E402
from memconsole.memory.models import Episode  # noqa: E402
from memconsole.memory.pending_models import PendingVector  # noqa: E402
from memconsole.memory.reindex import reindex  # noqa: E402
from memconsole.memory.scopes import derive_scope  # noqa: E402

payload = json.load(sys.stdin)
keys = derive_scope("crash-bot", "group_1", "session")
actor = Actor.system("tests/write-behind")

if payload["role"] == "writer":
    for i in range(payload["count"]):
        result = episodes.remember(keys, actor, f"note {i}: the {i}th visitor brought a green umbrella")
        print(f"ack {result.episode.episode_id}", flush=True)
    time.sleep(600)  # killed before this ends
else:
    acked = payload["acked"]
    waiting = PendingVector.objects.count()
    stored = set(Episode.objects.filter(episode_id__in=acked).values_list("episode_id", flat=True))
    first = Episode.objects.get(episode_id=acked[-1])
    found = [h.episode.episode_id for h in retrieval.recall(keys, first.content, top_k=3)]
    start_in_web()  # what gunicorn's post_worker_init does: the indexer drains what the crash left
    deadline = time.monotonic() + 120
    while PendingVector.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    indexer.stop()
    print(
        json.dumps(
            {
                "pending_at_start": waiting,
                "lost": sorted(set(acked) - stored),
                "recalled_before_drain": acked[-1] in found,
                "pending_after": PendingVector.objects.count(),
                "not_in_index": sorted(set(acked) - set(vectors.all_ids(keys.user_key))),
                "drift": reindex(check_only=True).drift,
                "chain": audit.verify_audit_chain().ok,
            }
        )
    )
