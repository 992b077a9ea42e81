"""OpenTelemetry tracing, off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (settings.MEMCONSOLE_TRACING).

When it is on, each process exports its spans over OTLP/gRPC in batches; the exporter reads the
standard OTEL_EXPORTER_OTLP_* variables (endpoint, headers, certificates) and the resource reads
OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. When it is off nothing is built: `span()` is a
`nullcontext` and the request middleware adds no work, so tracing costs nothing by default.

The tracer provider is memconsole's own (not OpenTelemetry's global one, which can be set once per
process): `start()` builds it after the fork, in each worker (the observability app's `ready`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # chromadb loads it anyway
from opentelemetry.propagate import extract
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

INSTRUMENTATION = "memconsole"
DEFAULT_SERVICE_NAME = "memconsole"

_lock = threading.Lock()
_provider: TracerProvider | None = None
_tracer: Tracer | None = None


def start(exporter: SpanExporter | None = None, processor: type[SpanProcessor] | None = None) -> TracerProvider:
    """Turn tracing on in this process: spans go to `exporter` (default: OTLP over gRPC, configured
    by the OTEL_EXPORTER_OTLP_* variables) through `processor` (default: batches)."""
    global _provider, _tracer
    if exporter is None:
        exporter = OTLPSpanExporter()
    # OTEL_SERVICE_NAME, when set, wins over memconsole's default name.
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: DEFAULT_SERVICE_NAME}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor((processor or BatchSpanProcessor)(exporter))  # type: ignore[call-arg]
    with _lock:
        previous, _provider, _tracer = _provider, provider, provider.get_tracer(INSTRUMENTATION)
    if previous is not None:
        previous.shutdown()
    return provider


def stop() -> None:
    """Turn tracing off in this process (flushing what is pending)."""
    global _provider, _tracer
    with _lock:
        provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def enabled() -> bool:
    return _tracer is not None


def span(
    name: str, attributes: Mapping[str, Any] | None = None, kind: SpanKind = SpanKind.INTERNAL
) -> AbstractContextManager[Span | None]:
    """A span around a block (the current span becomes its parent), or nothing when tracing is off."""
    tracer = _tracer
    if tracer is None:
        return nullcontext()
    return _span(tracer, name, attributes, kind, None)


def server_span(
    name: str, headers: Mapping[str, str], attributes: Mapping[str, Any]
) -> AbstractContextManager[Span | None]:
    """The span of one HTTP request, continuing the caller's trace (W3C `traceparent` in `headers`)."""
    tracer = _tracer
    if tracer is None:
        return nullcontext()
    return _span(tracer, name, attributes, SpanKind.SERVER, extract(headers))


@contextmanager
def _span(
    tracer: Tracer, name: str, attributes: Mapping[str, Any] | None, kind: SpanKind, context: Context | None
) -> Iterator[Span]:
    with tracer.start_as_current_span(name, context=context, kind=kind, attributes=attributes) as current:
        yield current


def mark_error(current: Span | None, description: str) -> None:
    if current is not None:
        current.set_status(Status(StatusCode.ERROR, description))
