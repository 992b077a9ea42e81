"""Prometheus metrics (prometheus-client): the series memconsole records, and their exposition.

Code records through the small helpers here (`timed`, `embedding`, `vector_index_call`,
`observe_request`); each helper also opens a tracing span, so one call site gives both. Series that
need the database (episodes not indexed, the audit chain's length) are not recorded here: the
/metrics view reads them at scrape time (memconsole/observability/collectors.py).

Several gunicorn workers: gunicorn_config.py's `on_starting` points PROMETHEUS_MULTIPROC_DIR at a
fresh directory before any worker starts; each worker then writes its values to files there
(prometheus-client's multiprocess mode, chosen when the module is first imported) and a scrape,
whichever worker answers it, adds up every worker's files. Counters and histograms of workers
that exited stay counted, so totals never go backwards when a worker is replaced.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from . import tracing

MULTIPROCESS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST

_multiprocess_dir = os.environ.get(MULTIPROCESS_DIR_VARIABLE)
if _multiprocess_dir:
    # A process started with the variable but not by gunicorn (manage.py in the same container)
    # would otherwise fail on its first metric.
    Path(_multiprocess_dir).mkdir(parents=True, exist_ok=True)

# Seconds. Requests and operations run from ~1 ms (a cached page) to minutes (a large export).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REQUEST_DURATION = Histogram(
    "memconsole_http_request_duration_seconds",
    "HTTP requests by route (URL pattern name), method and status; _count is the request count.",
    ["route", "method", "status"],
    buckets=LATENCY_BUCKETS,
)
RATE_LIMIT_REFUSALS = Counter(
    "memconsole_rate_limit_refusals",
    "Requests refused with 429 (bot API rate limit, login lockouts) by route.",
    ["route"],
)
OPERATION_DURATION = Histogram(
    "memconsole_operation_duration_seconds",
    "Memory operations (remember, recall, inject) by operation; inject includes its recall.",
    ["operation"],
    buckets=LATENCY_BUCKETS,
)
EMBEDDING_DURATION = Histogram(
    "memconsole_embedding_duration_seconds",
    "Time to embed one batch of texts (the ONNX model or the lexical fallback).",
    buckets=FAST_BUCKETS,
)
EMBEDDED_TEXTS = Counter("memconsole_embedded_texts", "Texts embedded.")
VECTOR_INDEX_DURATION = Histogram(
    "memconsole_vector_index_duration_seconds",
    "Calls to the vector index (Chroma) by operation, failed ones included.",
    ["operation"],
    buckets=FAST_BUCKETS,
)
VECTOR_INDEX_ERRORS = Counter(
    "memconsole_vector_index_errors",
    "Vector index (Chroma) calls that failed, by operation.",
    ["operation"],
)


@contextmanager
def timed(operation: str) -> Iterator[None]:
    """Time a memory operation (also usable as a decorator: `@metrics.timed("recall")`)."""
    started = time.perf_counter()
    with tracing.span(f"memconsole.{operation}"):
        try:
            yield
        finally:
            OPERATION_DURATION.labels(operation).observe(time.perf_counter() - started)


@contextmanager
def embedding(texts: int) -> Iterator[None]:
    """Time embedding a batch of `texts` texts."""
    started = time.perf_counter()
    with tracing.span("embedding", {"memconsole.texts": texts}):
        try:
            yield
        finally:
            EMBEDDING_DURATION.observe(time.perf_counter() - started)
            EMBEDDED_TEXTS.inc(texts)


@contextmanager
def vector_index_call(operation: str) -> Iterator[None]:
    """Time one call to the vector index; an exception escaping it counts as a vector-index error."""
    started = time.perf_counter()
    with tracing.span(f"chroma.{operation}", {"db.system.name": "chromadb", "db.operation.name": operation}) as span:
        try:
            yield
        except Exception as exc:
            VECTOR_INDEX_ERRORS.labels(operation).inc()
            tracing.mark_error(span, type(exc).__name__)
            raise
        finally:
            VECTOR_INDEX_DURATION.labels(operation).observe(time.perf_counter() - started)


def observe_request(route: str, method: str, status: int, seconds: float) -> None:
    REQUEST_DURATION.labels(route, method, str(status)).observe(seconds)
    if status == 429:
        RATE_LIMIT_REFUSALS.labels(route).inc()


def multiprocess_dir() -> str | None:
    """The directory every worker writes its values to, or None in a single process."""
    return os.environ.get(MULTIPROCESS_DIR_VARIABLE) or None


def exposition(collectors: Iterable[Collector] = ()) -> bytes:
    """Every series in Prometheus' text format: all workers' (or this process's), then `collectors`'."""
    registry = CollectorRegistry()
    directory = multiprocess_dir()
    if directory:
        MultiProcessCollector(registry, directory)  # type: ignore[no-untyped-call]
    else:
        registry.register(REGISTRY)  # this process's series, with the process and GC collectors
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry)
