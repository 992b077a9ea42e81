"""A bot token. Payload (stdin JSON): {"bot"}. Prints {"token": secret}."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

from memconsole.memory import tokens  # noqa: E402
from memconsole.memory.audit import Actor  # noqa: E402

payload = json.load(sys.stdin)
_, secret = tokens.create_token("jobs tests", [payload["bot"]], Actor.system("tests/jobs"))
print(json.dumps({"token": secret}))
