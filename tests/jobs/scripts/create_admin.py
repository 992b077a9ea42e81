"""An admin account to log into the console with. Payload (stdin JSON): {"username", "password"}."""

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

payload = json.load(sys.stdin)
print(json.dumps(User.objects.create_superuser(payload["username"], "", payload["password"]).pk))
