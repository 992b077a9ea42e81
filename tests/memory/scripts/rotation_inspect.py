"""A census of every sealed row during and after a key rotation (test_rotation.py): how many are
under the newest key, under another key, in clear; which do not open or read wrongly; the audit
chain; the rotation's own audit entries. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

from memconsole.lib import crypto  # noqa: E402
from memconsole.memory.audit import verify_audit_chain  # noqa: E402
from memconsole.memory.models import AuditEntry, Episode, InjectionSnapshot, Profile, ProfileVersion  # noqa: E402

Sealed = Episode | Profile | ProfileVersion | AuditEntry | InjectionSnapshot


def census(out: dict[str, Any], model: type[Sealed]) -> None:
    rows: list[Sealed] = list(model.objects.order_by("pk"))
    for row in rows:
        out["rows"] += 1
        stored = row.content_stored if isinstance(row, Episode) else row.payload_stored
        if not row.encrypted:
            out["plain"] += 1
        elif crypto.is_under_newest_key(stored):
            out["newest"] += 1
        else:
            out["other"] += 1
        try:
            value = row.content if isinstance(row, Episode) else json.dumps(row.payload)
        except Exception as exc:  # a row that does not open is reported, not raised
            out["bad"].append(f"{model.__name__} {row.pk}: {exc}")
            continue
        if isinstance(row, Episode) and value != f"episode {int(row.episode_id, 16)}: ünïcödé 内容":
            out["bad"].append(f"episode {row.pk} reads {value[:40]!r}")


def main() -> None:
    out: dict[str, Any] = {"newest": 0, "other": 0, "plain": 0, "bad": [], "rows": 0}
    for model in (Episode, Profile, ProfileVersion, AuditEntry, InjectionSnapshot):
        census(out, model)
    out["chain"] = str(verify_audit_chain())
    out["operations"] = list(
        AuditEntry.objects.filter(operation__startswith="key_rotation")
        .order_by("id")
        .values_list("operation", flat=True)
    )
    # Entries recording the state of rows written before row binding (the seed writes rows directly).
    out["baselines"] = AuditEntry.objects.filter(operation="row_baseline").count()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
