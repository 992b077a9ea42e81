"""Fill an installation for the no-trace erasure test (test_erasure.py): the subject's episodes in a
group and in a bot-wide scope, 30 episodes of someone else, the subject's profile, two snapshots.

Payload (stdin JSON): {"subject": sender id, "markers": [two words only the subject's data holds]}.
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

from memconsole.memory import episodes, injection, profiles  # noqa: E402
from memconsole.memory.audit import Actor  # noqa: E402
from memconsole.memory.scopes import derive_scope  # noqa: E402


def main() -> None:
    payload = json.loads(sys.stdin.read())
    subject, markers = payload["subject"], payload["markers"]
    actor = Actor.system("setup")
    group = derive_scope("bot-a", "group_100", "session")
    shared = derive_scope("bot-a", "group_200", "bot")
    erin = {"sender_id": subject, "sender_name": "Erin"}
    episodes.remember(group, actor, f"I will sail to {markers[0]} in May", tags=["travel"], **erin)
    episodes.remember(group, actor, f"我的{markers[1]}在城东", **erin)
    episodes.remember(shared, actor, f"{markers[0]} ferry times are on the board", **erin)
    for n in range(30):
        episodes.remember(
            group, actor, f"ordinary group note number {n} about lunch", sender_id="other-9", sender_name="Olaf"
        )
    profiles.update_profile(group, actor, "speaker", subject, name="Erin", notes=f"visits {markers[0]}")
    profiles.update_profile(group, actor, "speaker", subject, add_traits=["sails"])
    injection.record_injection(group, actor, "sailing plans", top_k=5, **erin)
    injection.record_injection(
        group, actor, "sail to Zanzibar ferry", sender_id="other-9", sender_name="Olaf", top_k=10
    )
    first = [e.episode_id for e in episodes.list_episodes(group, sender_id=subject).episodes][:1]
    episodes.archive(group, actor, first)


if __name__ == "__main__":
    main()
