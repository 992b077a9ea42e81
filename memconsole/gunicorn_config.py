"""gunicorn settings for memconsole (`gunicorn -c python:memconsole.gunicorn_config`).

Workers come from WEB_CONCURRENCY (default 1). The embedded Chroma index is single-process: with
more than one worker it must be a Chroma server (CHROMA_HOST), and the server refuses to start
otherwise.
"""

from __future__ import annotations

import os
import sys

workers = int(os.environ.get("WEB_CONCURRENCY", "1") or "1")
threads = int(os.environ.get("GUNICORN_THREADS", "4") or "4")
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "120") or "120")
accesslog = "-"
preload_app = False  # each worker builds its own database and Chroma clients after the fork


def check_embedded_index(worker_count: int, chroma_host: str) -> str | None:
    """The reason the server must not start, or None."""
    if worker_count > 1 and not chroma_host:
        return (
            f"memconsole: {worker_count} workers need a Chroma server; the embedded index (CHROMA_PATH) "
            "is single-process. Set CHROMA_HOST/CHROMA_PORT (see docs/operations.md) or run one worker "
            "(WEB_CONCURRENCY=1)."
        )
    return None


def on_starting(server) -> None:  # gunicorn hook
    reason = check_embedded_index(server.cfg.workers, os.environ.get("CHROMA_HOST", ""))
    if reason:
        print(reason, file=sys.stderr)
        sys.exit(3)
