"""After the erasure (test_erasure.py): export both scopes with their audit and every snapshot's
payload into a folder, and verify the audit chain.

Payload (stdin JSON): {"out": folder}. Writes group.json, shared.json and snapshots.json there;
prints "CHAIN <ok> <report>".
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

from memconsole.memory import exports  # noqa: E402
from memconsole.memory.audit import Actor, verify_audit_chain  # noqa: E402
from memconsole.memory.models import InjectionSnapshot  # noqa: E402
from memconsole.memory.scopes import derive_scope  # noqa: E402


def main() -> None:
    out = Path(json.loads(sys.stdin.read())["out"])
    actor = Actor.system("check")
    scopes = {
        "group": derive_scope("bot-a", "group_100", "session"),
        "shared": derive_scope("bot-a", "group_200", "bot"),
    }
    for name, keys in scopes.items():
        with (out / f"{name}.json").open("w", encoding="utf-8") as handle:
            handle.writelines(exports.stream_scope_export(keys, actor, include_audit=True))
    with (out / "snapshots.json").open("w", encoding="utf-8") as handle:
        json.dump([s.payload for s in InjectionSnapshot.objects.all()], handle, ensure_ascii=False)
    report = verify_audit_chain()
    print("CHAIN", report.ok, report)


if __name__ == "__main__":
    main()
