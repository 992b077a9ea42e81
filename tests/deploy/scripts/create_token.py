"""One bot token for the proxy tests (test_proxy.py).

Payload (stdin JSON): {"bot"}. Prints {"token": secret}.
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

from memconsole.memory import tokens  # noqa: E402
from memconsole.memory.audit import Actor  # noqa: E402


def main() -> None:
    payload = json.loads(sys.stdin.read())
    _, secret = tokens.create_token("proxy tests", [payload["bot"]], Actor.system("tests/deploy"))
    print(json.dumps({"token": secret}))


if __name__ == "__main__":
    main()
