"""A superuser for a test to log into the console with (test_isolation_load.py).

Payload (stdin JSON): {"username", "email", "password"}. Prints its primary key as JSON.
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

from django.contrib.auth.models import User  # noqa: E402


def main() -> None:
    payload = json.loads(sys.stdin.read())
    user = User.objects.create_superuser(payload["username"], payload["email"], payload["password"])
    print(json.dumps(user.pk))


if __name__ == "__main__":
    main()
