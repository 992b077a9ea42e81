"""Whether tracing is on in a fresh process (test_tracing.py): the setting, then the tracer.

Payload (stdin JSON): {}. Prints "<settings.MEMCONSOLE_TRACING> <tracing.enabled()>".
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402

from memconsole.lib import tracing  # noqa: E402

if __name__ == "__main__":
    print(settings.MEMCONSOLE_TRACING, tracing.enabled())
