"""Series read from the database when /metrics is scraped, from counters kept in step by the
domain, so that a scrape never counts a million rows: episodes by status (`EpisodeCounts`, one row
per isolation key), episodes not indexed (the `vector_current` index; at most NOT_INDEXED_CAP are
counted, which says "more than the cap" as clearly as an exact figure would) and the audit chain's
length (the sum of every chain head's `AuditHead.seq`). Read once per scrape, whichever worker answers it."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from django.db import DatabaseError
from django.db.models import Sum
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from memconsole.memory.models import STATUSES, AuditHead, Episode, EpisodeCounts
from memconsole.memory.pending_models import PendingVector

NOT_INDEXED_CAP = 100_000

log = logging.getLogger(__name__)


class MemoryCollector(Collector):
    def describe(self) -> list[Metric]:
        return []  # nothing is read when the collector is registered, only when it is scraped

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("memconsole_database_up", "Whether /metrics could read the database.")
        try:
            totals = EpisodeCounts.objects.aggregate(**{status: Sum(status) for status in STATUSES})
            # Not the write-behind backlog (its own gauge): those are found by recall and being written.
            waiting = PendingVector.objects.values("episode_id")
            unindexed = Episode.objects.filter(vector_current=False).exclude(pk__in=waiting)
            not_indexed = unindexed.values("pk")[:NOT_INDEXED_CAP].count()
            chain_length = AuditHead.objects.aggregate(entries=Sum("seq"))["entries"] or 0
        except DatabaseError as exc:
            log.warning("metrics: the database could not be read: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        episodes = GaugeMetricFamily("memconsole_episodes", "Episodes by status.", labels=["status"])
        for status in STATUSES:
            episodes.add_metric([status], totals[status] or 0)
        yield episodes
        yield GaugeMetricFamily(
            "memconsole_episodes_not_indexed",
            f"Episodes saved but not (or not currently) in the vector index and not waiting for the "
            f"indexer (memconsole_index_backlog counts those); `manage.py reindex` indexes them. "
            f"Counted up to {NOT_INDEXED_CAP}.",
            value=not_indexed,
        )
        yield GaugeMetricFamily(
            "memconsole_audit_chain_length",
            "Entries in the audit hash chains (every space's and the install-wide one).",
            value=chain_length,
        )
