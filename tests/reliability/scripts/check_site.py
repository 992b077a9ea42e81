"""The restart after a crash: open the installation in a fresh process and inspect everything.

Reads a JSON payload on stdin:
    recover       commands to run first, as an operator would after a crash (e.g. ["rotate_keys"])
    acknowledged  episode ids a client was told were stored (2xx): each must be present
    repair        run `reindex` once between two `reindex --check` (default true)
Prints one JSON line: integrity, audit chain, counters, reindex drift before/after one repair run,
missing acknowledged ids, episodes per source, import audit entries and unreadable rows.
"""

from __future__ import annotations

import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.core.management.base import CommandError  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count  # noqa: E402

from memconsole.lib import crypto  # noqa: E402
from memconsole.memory.audit import verify_audit_chain  # noqa: E402
from memconsole.memory.models import (  # noqa: E402
    STATUS_ACTIVE,
    STATUS_ARCHIVED,
    STATUS_SUPERSEDED,
    AuditEntry,
    Episode,
    EpisodeCounts,
    InjectionSnapshot,
    Profile,
    ProfileVersion,
)
from memconsole.memory.reindex import reindex  # noqa: E402


def command(*args: str) -> dict:
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            call_command(*args, stdout=out, stderr=err)
        ok, error = True, ""
    except CommandError as exc:
        ok, error = False, str(exc)
    return {"args": list(args), "ok": ok, "error": error, "out": out.getvalue()[-2000:], "err": err.getvalue()[-2000:]}


def integrity() -> list[str]:
    if connection.vendor != "sqlite":
        return ["ok"]
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA integrity_check")
        rows = [row[0] for row in cursor.fetchall()]
        cursor.execute("PRAGMA foreign_key_check")
        rows += [f"foreign key: {row}" for row in cursor.fetchall()]
    return rows


def counters() -> list[dict]:
    """Every user_key whose EpisodeCounts differ from its rows."""
    real: dict[str, dict[str, int]] = {}
    for user_key, status, n in Episode.objects.values_list("user_key", "status").annotate(n=Count("id")):
        real.setdefault(user_key, {})[status] = n
    wrong = []
    keys = set(real) | set(EpisodeCounts.objects.values_list("user_key", flat=True))
    stored = {c.user_key: c for c in EpisodeCounts.objects.all()}
    for user_key in sorted(keys):
        rows = real.get(user_key, {})
        c = stored.get(user_key)
        have = (c.active, c.superseded, c.archived) if c else (0, 0, 0)
        want = (rows.get(STATUS_ACTIVE, 0), rows.get(STATUS_SUPERSEDED, 0), rows.get(STATUS_ARCHIVED, 0))
        if have != want:
            wrong.append({"user_key": user_key, "counters": have, "rows": want})
    return wrong


def unreadable() -> list[str]:
    bad = []
    for episode in Episode.objects.only("pk", "content_stored", "encrypted").iterator():
        try:
            episode.content  # noqa: B018
        except crypto.DecryptionError:
            bad.append(f"episode {episode.pk}")
    for model in (Profile, ProfileVersion, AuditEntry, InjectionSnapshot):
        for row in model.objects.only("pk", "payload_stored", "encrypted").iterator():
            if getattr(row, "redacted", False):
                continue
            try:
                row.payload  # noqa: B018
            except (crypto.DecryptionError, ValueError):
                bad.append(f"{model.__name__} {row.pk}")
    return bad


def not_under_newest_key() -> int:
    if not crypto.enabled():
        return 0
    count = 0
    for episode in Episode.objects.only("content_stored", "encrypted").iterator():
        if not episode.encrypted or not crypto.is_under_newest_key(episode.content_stored):
            count += 1
    for model in (Profile, ProfileVersion, AuditEntry, InjectionSnapshot):
        for row in model.objects.only("payload_stored", "encrypted").iterator():
            if not row.encrypted or not crypto.is_under_newest_key(row.payload_stored):
                count += 1
    return count


def main() -> None:
    payload = json.loads(sys.stdin.read() or "{}")
    result: dict = {"recover": [command(*args) for args in payload.get("recover", [])]}
    result["integrity"] = integrity()
    chain = verify_audit_chain()
    chains: dict[str, list[int]] = {}  # one chain per space, and the install-wide one ("")
    for name, seq in AuditEntry.objects.order_by("chain", "seq").values_list("chain", "seq"):
        chains.setdefault(name, []).append(seq)
    contiguous = all(seqs == list(range(1, len(seqs) + 1)) for seqs in chains.values())
    result["chain"] = {"ok": chain.ok, "checked": chain.checked, "reason": chain.reason}
    result["seq_contiguous"] = contiguous
    result["counters_wrong"] = counters()
    before = reindex(check_only=True)
    result["drift_before"] = {"drift": before.drift, "what": before.describe_drift() if before.drift else ""}
    if payload.get("repair", True):
        result["repair"] = command("reindex")
        result["check_after"] = command("reindex", "--check")
    acknowledged = payload.get("acknowledged", [])
    present = set(Episode.objects.filter(episode_id__in=acknowledged).values_list("episode_id", flat=True))
    result["missing"] = sorted(set(acknowledged) - present)
    result["episodes"] = Episode.objects.count()
    result["by_source"] = dict(Episode.objects.values_list("source").annotate(n=Count("id")))
    result["by_user_key"] = dict(Episode.objects.values_list("user_key").annotate(n=Count("id")))
    result["not_current"] = Episode.objects.filter(vector_current=False).count()
    result["operations"] = dict(AuditEntry.objects.values_list("operation").annotate(n=Count("id")))
    result["imports"] = [
        {"scope_key": e.scope_key, "episodes": e.payload["metadata"].get("episodes")}
        for e in AuditEntry.objects.filter(operation="import").order_by("id")
    ]
    if payload.get("list_episodes"):
        result["episode_ids"] = sorted(Episode.objects.values_list("episode_id", flat=True))
        result["remember_targets"] = sorted(
            AuditEntry.objects.filter(operation="remember").values_list("target_id", flat=True)
        )
    result["unreadable"] = unreadable()
    result["not_under_newest_key"] = not_under_newest_key()
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
