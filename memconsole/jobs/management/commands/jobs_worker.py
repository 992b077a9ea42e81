from __future__ import annotations

import argparse
import math
import signal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from memconsole.memory import indexer

from ...queue import recover
from ...worker import Recovery, make_worker, start_indexer, worker_id

MIN_INTERVAL, MAX_INTERVAL = 0.1, 3600.0


def interval_seconds(value: str) -> float:
    """`--interval`: seconds between 0.1 (not a busy loop) and an hour, else a usage error."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and MIN_INTERVAL <= seconds <= MAX_INTERVAL):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a number of seconds from {MIN_INTERVAL:g} to {MAX_INTERVAL:g}"
        )
    return seconds


class Command(BaseCommand):
    help = (
        "Run background jobs (imports, erasure, health runs, index repair, key rotation) from the database queue, "
        "and with MEMCONSOLE_INDEXER=worker write the pending vectors into the index; "
        "resumes the jobs of workers that stopped. With an embedded vector index (no CHROMA_HOST) the web server "
        "runs the jobs itself (MEMCONSOLE_JOBS_IN_WEB): run this only with the web server stopped, or with a "
        "Chroma server. Ctrl-C (SIGTERM) finishes the current job, then stops."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", action="store_true", help="run the queued jobs, then exit")
        parser.add_argument(
            "--interval",
            type=interval_seconds,
            default=None,
            help=f"seconds between polls of an empty queue, {MIN_INTERVAL:g} to {MAX_INTERVAL:g} "
            "(default MEMCONSOLE_JOBS_POLL_SECONDS)",
        )

    def handle(self, *args: Any, batch: bool = False, interval: float | None = None, **options: Any) -> None:
        if not settings.CHROMA_HOST and settings.MEMCONSOLE_JOBS_IN_WEB:
            self.stderr.write(
                "note: the vector index is embedded; do not run this beside a web server that runs jobs itself "
                "(two processes must not write one Chroma folder)"
            )
        ident = worker_id()
        self.stderr.write(f"jobs worker {ident}: waiting for jobs")
        loop = make_worker(batch=batch, interval=interval, ident=ident)
        if batch:
            for line in recover():
                self.stderr.write(f"job {line}")
            if indexer.mode() == indexer.WORKER:
                self.stderr.write(f"pending vectors written: {indexer.drain().indexed}")
            loop.run()
            self.stderr.write("jobs worker: queue empty, exiting")
            return
        loop.configure_signals()
        recovery = Recovery()
        recovery.start()
        start_indexer(in_worker=True)  # MEMCONSOLE_INDEXER=worker: this process drains pending vectors
        try:
            loop.run()
        finally:
            recovery.stopped.set()
            indexer.stop()
            loop.reset_signals()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
