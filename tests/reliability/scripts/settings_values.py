"""The values of some Django settings as this environment makes them (test_security.py).

Payload (stdin JSON): a list of setting names. Prints {name: value}.
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


def main() -> None:
    print(json.dumps({name: getattr(settings, name) for name in json.loads(sys.stdin.read())}))


if __name__ == "__main__":
    main()
