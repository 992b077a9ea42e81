"""gunicorn settings for memconsole (`gunicorn memconsole.wsgi -c python:memconsole.gunicorn_config`).

Workers come from WEB_CONCURRENCY (default 1), threads per worker from GUNICORN_THREADS (default 4),
the worker timeout from GUNICORN_TIMEOUT (default 120 s). The embedded Chroma index is
single-process: with more than one worker the index must be a Chroma server (CHROMA_HOST), and the
server refuses to start otherwise (exit code 3). It also refuses to grow past one worker later
(SIGTTIN, or a reload with a higher WEB_CONCURRENCY). See docs/operations.md.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gunicorn.http import errors as gunicorn_http_errors

from memconsole import gunicorn_errors

EMBEDDED_INDEX_EXIT_CODE = 3


def _whole_number(name: str, default: int, minimum: int) -> int:
    value = (os.environ.get(name) or "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        sys.stderr.write(f"memconsole: {name}={value!r} must be a whole number of at least {minimum}\n")
        sys.exit(2)
    return number


workers = _whole_number("WEB_CONCURRENCY", 1, 1)
threads = _whole_number("GUNICORN_THREADS", 4, 1)
timeout = _whole_number("GUNICORN_TIMEOUT", 120, 1)
accesslog = "-"
preload_app = False  # each worker builds its own database and Chroma clients after the fork
# The control socket (gunicorn >= 25) lives at one fixed path per user, so two servers on one
# machine collide, and it can add workers at runtime; memconsole does not use it.
control_socket_disable = True
if Path("/dev/shm").is_dir():
    # Worker heartbeats on tmpfs: on a container's overlay filesystem they can stall the worker.
    worker_tmp_dir = "/dev/shm"


def chroma_server_configured() -> bool:
    """Whether the environment names a Chroma server (CHROMA_HOST, or CHROMA_HOST_FILE as settings reads it)."""
    if (os.environ.get("CHROMA_HOST") or "").strip():
        return True
    file_name = os.environ.get("CHROMA_HOST_FILE")
    if file_name:
        try:
            return bool(Path(file_name).read_text().strip())
        except OSError:
            return False  # settings.py reports the unreadable file when a worker starts
    return False


def check_embedded_index(worker_count: int, chroma_host: str | bool) -> str | None:
    """The reason the server must not start, or None."""
    if worker_count > 1 and not chroma_host:
        return (
            f"memconsole: {worker_count} workers need a Chroma server; the embedded index (CHROMA_PATH) "
            "is single-process. Set CHROMA_HOST/CHROMA_PORT (see docs/operations.md) or run one worker "
            "(WEB_CONCURRENCY=1)."
        )
    return None


# The hooks' `server` is gunicorn's Arbiter (gunicorn ships no type hints, hence Any).
def on_starting(server: Any) -> None:  # gunicorn hook, in the master before any worker starts
    reason = check_embedded_index(server.cfg.workers, chroma_server_configured())
    if reason:
        sys.stderr.write(f"{reason}\n")
        sys.exit(EMBEDDED_INDEX_EXIT_CODE)
    prepare_metrics_dir()


# --- metrics: prometheus-client's multiprocess mode (memconsole/lib/metrics.py) ---------------------
METRICS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
METRICS_DIR_PREFIX = "memconsole-metrics-"


def prepare_metrics_dir() -> Path:
    """The directory the workers write their metric values to, set in the environment they inherit:
    PROMETHEUS_MULTIPROC_DIR emptied of an earlier run's files, or a new private one."""
    given = (os.environ.get(METRICS_DIR_VARIABLE) or "").strip()
    if given:
        directory = Path(given)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink()
    else:
        shm = "/dev/shm" if Path("/dev/shm").is_dir() else None  # tmpfs: the files are written on every request
        directory = Path(tempfile.mkdtemp(prefix=METRICS_DIR_PREFIX, dir=shm))
    os.environ[METRICS_DIR_VARIABLE] = str(directory)
    return directory


def child_exit(server: Any, worker: Any) -> None:  # gunicorn hook, in the master when a worker has exited
    # Imported here, not at the top: prometheus-client picks single- or multi-process mode when it is
    # first imported, and the workers fork from this process, so it must not be imported before
    # on_starting has set PROMETHEUS_MULTIPROC_DIR.
    from prometheus_client import multiprocess  # noqa: PLC0415 - see above

    multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


def on_exit(server: Any) -> None:  # gunicorn hook, in the master after the last worker has stopped
    directory = Path(os.environ.get(METRICS_DIR_VARIABLE) or "")
    if directory.name:
        for stale in directory.glob("*.db"):
            stale.unlink(missing_ok=True)
        if directory.name.startswith(METRICS_DIR_PREFIX):
            with contextlib.suppress(OSError):  # something else was put there: leave it
                directory.rmdir()


# gunicorn drains at most this much of a body the application did not read (a request refused
# before its body: 413 by its Content-Length, 401, 429), then closes the connection it had just
# answered as kept alive, and the client's next request on it gets no answer.
UNREAD_BODY_DRAIN = 64 * 1024


def pre_request(worker: Any, req: Any) -> None:  # gunicorn hook, in the worker before each request
    """A request with a body larger than gunicorn drains is answered with `Connection: close`, so
    a client never reuses a connection the server is about to close."""
    length = next((value for name, value in req.headers if name == "CONTENT-LENGTH"), "")
    if length.isdigit() and int(length) > UNREAD_BODY_DRAIN:
        req.must_close = True


# What is left of a body the application refused unread is read to its end before the connection
# closes: closing a socket with unread bytes sends a TCP reset, and a sender still writing the body
# (nginx, which sends the whole request before it reads the answer) fails its write and never reads
# the answer (nginx answers 502 instead of the 413). Bounded: more than nginx lets through
# (client_max_body_size in deploy/nginx.conf), for at most a few seconds.
REFUSED_BODY_DRAIN_BYTES = 80 * 1024 * 1024
REFUSED_BODY_DRAIN_SECONDS = 5.0


def post_request(worker: Any, req: Any, environ: Any, resp: Any) -> None:  # gunicorn hook, after the answer
    """Read the rest of a body the application did not read, within the bounds above."""
    body = getattr(req, "body", None)
    sock = getattr(getattr(req, "unreader", None), "sock", None)
    if body is None or sock is None:
        return
    deadline = time.monotonic() + REFUSED_BODY_DRAIN_SECONDS
    prior_timeout = sock.gettimeout()
    drained = 0
    try:
        while drained < REFUSED_BODY_DRAIN_BYTES:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            sock.settimeout(remaining)
            data = body.read(64 * 1024)
            if not data:
                break
            drained += len(data)
    except (OSError, gunicorn_http_errors.ParseException) as error:  # NoMoreData is an OSError
        # The client went away or sent a broken body after its answer: nothing is left to answer.
        worker.log.debug("Stopped reading an unread request body: %r", error)
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(prior_timeout)


def post_worker_init(worker: Any) -> None:  # gunicorn hook, in each worker once the app is loaded
    gunicorn_errors.install()  # gunicorn's own refusals (414, 431, ...) in JSON, not its HTML page
    # Background jobs in this process when the index is embedded (MEMCONSOLE_JOBS_IN_WEB; one worker
    # only, checked above); imported here: the app, and so Django, is loaded only now.
    from memconsole.jobs.worker import start_in_web  # noqa: PLC0415 - see above

    start_in_web()


def nworkers_changed(server: Any, new_value: int, old_value: int | None) -> None:  # gunicorn hook
    """Keep one worker with the embedded index when something asks for more at runtime."""
    if old_value is None:  # the initial count, already checked by on_starting
        return
    reason = check_embedded_index(new_value, chroma_server_configured())
    if reason:
        server.log.error("%s Staying at %s worker(s).", reason, old_value)
        # Arbiter.num_workers is a property whose setter calls this hook; set its backing field.
        server._num_workers = old_value  # noqa: SLF001 - the one way to change the count without re-running this hook
