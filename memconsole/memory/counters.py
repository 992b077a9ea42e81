"""Per-user_key episode counters (`EpisodeCounts`), kept in step by every operation."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from .models import STATUS_ACTIVE, STATUS_ARCHIVED, STATUS_SUPERSEDED, Episode, EpisodeCounts


def count(user_key: str, **deltas: int) -> None:
    """Add `deltas` (active=1, superseded=-1, ...) to the counters and touch `last_activity`."""
    changes = {name: F(name) + delta for name, delta in deltas.items() if delta}
    rows = EpisodeCounts.objects.filter(user_key=user_key)
    if not rows.update(last_activity=timezone.now(), **changes):  # the space's first episode
        EpisodeCounts.objects.get_or_create(user_key=user_key)
        rows.update(last_activity=timezone.now(), **changes)


def recount(user_key: str) -> EpisodeCounts:
    """Recompute one user_key's counters from the rows (after bulk loads and imports).

    Inside a transaction that appends to the audit log, call `audit.lock_chain(...)` on its chains first (see there).
    """
    with transaction.atomic():
        EpisodeCounts.objects.get_or_create(user_key=user_key)
        # Locked before counting: a concurrent remember's increment then either commits before the
        # count (and is counted) or waits for this save (and is applied on top), never lost.
        counts = EpisodeCounts.objects.select_for_update().get(user_key=user_key)
        rows = Episode.objects.in_scope(user_key)
        counts.active = rows.filter(status=STATUS_ACTIVE).count()
        counts.superseded = rows.filter(status=STATUS_SUPERSEDED).count()
        counts.archived = rows.filter(status=STATUS_ARCHIVED).count()
        counts.save()
    return counts
