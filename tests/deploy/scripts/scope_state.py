"""One session scope of the deployment as one JSON line (test_workers.py): the audit chain, its
episodes and their vectors, and its session profile's traits and versions.

Payload (stdin JSON): {"bot", "session"}.
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

from memconsole.lib import vectors  # noqa: E402
from memconsole.memory.audit import verify_audit_chain  # noqa: E402
from memconsole.memory.models import AuditEntry, Episode, Profile  # noqa: E402
from memconsole.memory.pending_models import PendingVector  # noqa: E402
from memconsole.memory.scopes import derive_scope  # noqa: E402


def chain_seqs() -> dict[str, list[int]]:
    chains: dict[str, list[int]] = {}
    for name, seq in AuditEntry.objects.order_by("chain", "seq").values_list("chain", "seq"):
        chains.setdefault(name, []).append(seq)
    return chains


def wait_for_indexer(timeout: float = 60.0) -> None:
    """The servers write vectors behind their answers (MEMCONSOLE_INDEXER=thread): wait until none waits."""
    deadline = time.monotonic() + timeout
    while PendingVector.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def main() -> None:
    payload = json.loads(sys.stdin.read())
    wait_for_indexer()
    keys = derive_scope(payload["bot"], payload["session"], "session")
    chain = verify_audit_chain()
    episodes = list(Episode.objects.filter(user_key=keys.user_key).values_list("episode_id", "vector_current"))
    profile = Profile.objects.filter(scope_key=keys.scope_key, type="session").first()
    state = {
        "chain_ok": chain.ok,
        "chain_checked": chain.checked,
        "chain_reason": chain.reason,
        # {chain: its seqs in order}: one chain per space, and the install-wide one ("")
        "chains": chain_seqs(),
        "scope_key": keys.scope_key,
        "remember_entries": AuditEntry.objects.filter(operation="remember", scope_key=keys.scope_key).count(),
        "episodes": [e[0] for e in episodes],
        "not_indexed": [e[0] for e in episodes if not e[1]],
        "vectors": sorted(vectors.all_ids(keys.user_key)),
        "traits": profile.payload["traits"] if profile else [],
        "profile_version": profile.version if profile else 0,
        "versions": sorted(profile.versions.values_list("version", flat=True)) if profile else [],
    }
    print(json.dumps(state))


if __name__ == "__main__":
    main()
