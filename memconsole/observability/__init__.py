"""Seeing memconsole work: request ids, the access log, JSON logs, /metrics and request tracing.

The series themselves and the tracer live in memconsole/lib/metrics.py and lib/tracing.py (the
outside systems, Prometheus and OpenTelemetry), which domain code records through too.
"""
