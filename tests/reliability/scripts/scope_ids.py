"""Every registered scope's primary key, as one JSON line {"<scope_key>|<isolation>": pk}."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

from memconsole.memory.models import Scope  # noqa: E402


def main() -> None:
    print(json.dumps({f"{s.scope_key}|{s.isolation}": s.pk for s in Scope.objects.all()}))


if __name__ == "__main__":
    main()
