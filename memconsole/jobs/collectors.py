"""Job series for /metrics, read from the job table at scrape time (so they are right whichever
process ran the jobs: a worker container's own metrics are never scraped): queue depth (queued and
running jobs by kind), finished jobs by kind and outcome, and how long finished jobs ran (a
histogram over the newest `jobs.queue_stats` sample per kind), and the write-behind indexer's backlog
(vectors waiting, and the age of the oldest: memory/pending.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from django.db import DatabaseError
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from memconsole.memory import jobs, pending

log = logging.getLogger(__name__)

# Seconds: jobs run from a second (a health check) to hours (re-embedding a large install).
DURATION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)


class JobCollector(Collector):
    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        try:
            stats = jobs.queue_stats()
        except DatabaseError as exc:
            log.warning("metrics: the job table could not be read: %s", exc)
            return
        queued = GaugeMetricFamily("memconsole_jobs_queued", "Background jobs waiting for a worker.", labels=["kind"])
        running = GaugeMetricFamily("memconsole_jobs_running", "Background jobs running now.", labels=["kind"])
        finished = CounterMetricFamily(
            "memconsole_jobs_finished", "Background jobs that ended, by outcome.", labels=["kind", "status"]
        )
        durations = HistogramMetricFamily(
            "memconsole_job_duration_seconds", "How long finished background jobs ran.", labels=["kind"]
        )
        for item in stats:
            queued.add_metric([item.kind], item.queued)
            running.add_metric([item.kind], item.running)
            for status, count in item.finished.items():
                finished.add_metric([item.kind, status], count)
            buckets = [(str(edge), float(sum(1 for s in item.seconds if s <= edge))) for edge in DURATION_BUCKETS]
            buckets.append(("+Inf", float(len(item.seconds))))
            durations.add_metric([item.kind], buckets, item.seconds_sum)
        yield from (queued, running, finished, durations)
        try:
            waiting = pending.backlog()
        except DatabaseError as exc:
            log.warning("metrics: the pending vectors could not be read: %s", exc)
            return
        yield GaugeMetricFamily(
            "memconsole_index_backlog",
            "Episodes whose vector waits for the write-behind indexer (found by recall meanwhile).",
            value=waiting.count,
        )
        yield GaugeMetricFamily(
            "memconsole_index_backlog_oldest_seconds",
            "How long the oldest vector waiting for the write-behind indexer has waited (0: none waits).",
            value=waiting.oldest_seconds,
        )
