"""Write every kind of sealed value with encryption keys set (test_crypto.py): episodes (one then
deleted, so the audit entry keeps it), profiles, a snapshot; and one control value without keys.

Payload (stdin JSON): {"secret", "tag", "note", "trait"}. Prints "written".
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

from django.conf import settings  # noqa: E402

from memconsole.memory import episodes, injection, profiles  # noqa: E402
from memconsole.memory.audit import Actor  # noqa: E402
from memconsole.memory.scopes import derive_scope  # noqa: E402


def main() -> None:
    payload = json.loads(sys.stdin.read())
    secret, tag, note, trait = payload["secret"], payload["tag"], payload["note"], payload["trait"]
    system = Actor.system("crypto-test")
    keys = derive_scope("bot-a", "group_1", "session")
    # control: one value written without keys must be found by the same search (written first:
    # once a row is sealed the install is encrypted and refuses plaintext writes)
    keys_before = settings.MEMCONSOLE_FERNET_KEYS
    settings.MEMCONSOLE_FERNET_KEYS = []
    episodes.remember(derive_scope("bot-c", "group_9", "session"), system, "CONTROL-plaintext-canary")
    settings.MEMCONSOLE_FERNET_KEYS = keys_before
    made = episodes.remember(keys, system, secret, sender_id="u1")
    episodes.remember(keys, system, secret + " (second copy)", tags=[tag], sender_id="u1")
    profiles.update_profile(keys, system, "speaker", "u1", notes=note, add_traits=[trait])
    profiles.update_profile(keys, system, "session", notes=note + " v2")
    injection.record_injection(keys, system, "remind me of the PIN", sender_id="u1")
    episodes.delete(keys, system, [made.episode.episode_id])  # the audit entry keeps what was deleted

    print("written")


if __name__ == "__main__":
    main()
