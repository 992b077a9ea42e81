"""Write one warning through Django's logging set-up (test_logs.py), the way any module of the app
logs outside a request, so the test reads the formatter's line from stderr.

Payload (stdin JSON): {}. Writes "hello there" as a WARNING of the logger memconsole.check.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

if __name__ == "__main__":
    logging.getLogger("memconsole.check").warning("hello %s", "there")
