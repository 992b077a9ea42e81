"""Print the unfinished erasures as JSON (test_erasure_crash.py): `erasure.unfinished()`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

from memconsole.memory import erasure  # noqa: E402
from memconsole.memory.health.erasures import check_unfinished_erasures  # noqa: E402


def main() -> None:
    print(json.dumps({"unfinished": erasure.unfinished(), "check": check_unfinished_erasures().status}))


if __name__ == "__main__":
    main()
