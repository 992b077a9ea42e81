from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings

from memconsole.lib import tracing


class ObservabilityConfig(AppConfig):
    name = "memconsole.observability"
    label = "observability"
    verbose_name = "Observability"

    def ready(self) -> None:
        # In each process after gunicorn's fork (preload_app is off), so the span exporter's
        # thread lives in the worker that records the spans.
        if settings.MEMCONSOLE_TRACING and not tracing.enabled():
            tracing.start()
