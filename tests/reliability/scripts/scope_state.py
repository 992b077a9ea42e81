"""Everything about one scope after concurrent writers, as one JSON line.

Payload (stdin JSON): {"bot_uuid", "session_name", "isolation", "speaker"}.
"""

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

from django.db.models import Count  # noqa: E402

from memconsole.lib import vectors  # noqa: E402
from memconsole.memory.audit import verify_audit_chain  # noqa: E402
from memconsole.memory.models import AuditEntry, Episode, EpisodeCounts, Profile  # noqa: E402
from memconsole.memory.pending_models import PendingVector  # noqa: E402
from memconsole.memory.scopes import derive_scope  # noqa: E402


def profile_state(keys, profile_type: str, sender_id: str) -> dict:
    row = Profile.objects.filter(scope_key=keys.scope_key, type=profile_type, sender_id=sender_id).first()
    if row is None:
        return {"version": 0, "versions": [], "traits": [], "audit_versions": []}
    target = f"{profile_type}:{sender_id}" if sender_id else profile_type
    audited = AuditEntry.objects.filter(scope_key=keys.scope_key, operation="profile_update", target_id=target)
    return {
        "version": row.version,
        "versions": list(row.versions.order_by("version").values_list("version", flat=True)),
        # version numbers in the order their changes entered the audit chain
        "audit_versions": [entry.payload["metadata"]["version"] for entry in audited.order_by("id")],
        "traits": row.payload["traits"],
    }


def wait_for_indexer(timeout: float = 60.0) -> None:
    """The servers write vectors behind their answers (MEMCONSOLE_INDEXER=thread): wait until none waits."""
    deadline = time.monotonic() + timeout
    while PendingVector.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def main() -> None:
    job = json.loads(sys.stdin.read())
    wait_for_indexer()
    keys = derive_scope(job["bot_uuid"], job["session_name"], job["isolation"])
    rows = Episode.objects.filter(user_key=keys.user_key)
    counts = EpisodeCounts.objects.filter(user_key=keys.user_key).first()
    chain = verify_audit_chain()
    chains: dict[str, list[int]] = {}  # one chain per space, and the install-wide one ("")
    for name, seq in AuditEntry.objects.order_by("chain", "seq").values_list("chain", "seq"):
        chains.setdefault(name, []).append(seq)
    contiguous = all(seqs == list(range(1, len(seqs) + 1)) for seqs in chains.values())
    print(
        json.dumps(
            {
                "episodes": dict(rows.values_list("episode_id", "status")),
                "duplicate_ids": list(
                    Episode.objects.values("episode_id")
                    .annotate(n=Count("id"))
                    .filter(n__gt=1)
                    .values_list("episode_id", flat=True)
                ),
                "not_indexed": list(rows.filter(vector_current=False).values_list("episode_id", flat=True)),
                "vectors": sorted(vectors.all_ids(keys.user_key)),
                "counters": [counts.active, counts.superseded, counts.archived] if counts else [0, 0, 0],
                "real_counts": [rows.filter(status=s).count() for s in ("active", "superseded", "archived")],
                "operations": dict(
                    AuditEntry.objects.filter(user_key=keys.user_key).values_list("operation").annotate(n=Count("id"))
                ),
                "chain": {"ok": chain.ok, "checked": chain.checked, "reason": chain.reason},
                "seq_contiguous": contiguous,
                "speaker": profile_state(keys, "speaker", job["speaker"]),
                "session": profile_state(keys, "session", ""),
            }
        )
    )


if __name__ == "__main__":
    main()
