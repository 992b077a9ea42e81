"""Removing the probe's canaries: after every run, and what a killed probe left behind.

Rows, vectors, collections, snapshots and counters go; the canaries' audit entries stay (the
audit log is never edited): they are labelled by their actor `system:health-probe` and their
scope keys. Leftovers of a probe that was killed outright are swept by the next run.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from memconsole.lib import vectors

from .. import episodes
from ..models import Episode, EpisodeCounts, InjectionSnapshot, Profile, Scope
from ..scopes import PROBE_USER_KEY_PREFIX, derive_scope
from .probe import PROBE_ACTOR, PROBE_BOT_UUID, Canaries
from .result import OK, WARN, Check

log = logging.getLogger("memconsole.health")

LEFTOVER_AGE = timedelta(minutes=10)


def remove_probe_data(user_keys: list[str], scope_keys: list[str]) -> None:
    """Delete every trace of the given probe scopes except their audit entries."""
    for user_key, scope_key in zip(user_keys, scope_keys, strict=True):
        ids = list(Episode.objects.in_scope(user_key).values_list("episode_id", flat=True))
        if ids:
            try:
                keys = derive_scope(PROBE_BOT_UUID, scope_key.split(":", 1)[1], "session")
                episodes.delete(keys, PROBE_ACTOR, ids)  # audited, and removes the vectors
            except Exception:
                log.exception("probe canary delete failed; removing the rows directly")
    with transaction.atomic():
        Episode.objects.filter(user_key__in=user_keys).delete()
        InjectionSnapshot.objects.filter(user_key__in=user_keys).delete()
        EpisodeCounts.objects.filter(user_key__in=user_keys).delete()
        Scope.objects.filter(user_key__in=user_keys).delete()
        Profile.objects.filter(scope_key__in=scope_keys).delete()
    failed: list[vectors.VectorIndexError] = []
    for user_key in user_keys:
        try:
            vectors.drop(user_key)
        except vectors.VectorIndexError as exc:
            failed.append(exc)
    if failed:
        raise failed[0]


def cleanup(probe: Canaries) -> Check:
    """Remove this run's canaries and check that nothing of them is left (the `cleanup` check)."""
    problems = []
    try:
        remove_probe_data(probe.user_keys, probe.scope_keys)
    except Exception as exc:
        log.exception("health probe cleanup failed")
        problems.append(f"{type(exc).__name__}: {exc}")
    try:
        left = []
        rows = Episode.objects.filter(user_key__in=probe.user_keys).count()
        if rows:
            left.append(f"{rows} canary episodes")
        snapshots = InjectionSnapshot.objects.filter(user_key__in=probe.user_keys).count()
        if snapshots:
            left.append(f"{snapshots} canary snapshots")
        collections = [uk for uk in vectors.list_collections().values() if uk in probe.user_keys]
        if collections:
            left.append(f"{len(collections)} canary collections")
        if left:
            problems.append("left behind: " + ", ".join(left))
    except Exception as exc:
        problems.append(f"could not verify the cleanup: {type(exc).__name__}: {exc}")
    if problems:
        return Check(
            "cleanup",
            WARN,
            "the probe's canaries were not all removed: " + "; ".join(problems),
            gettext_noop(
                "The next health check removes probe leftovers older than 10 minutes; run it again once the "
                "database and the vector index are reachable."
            ),
        )
    return Check(
        "cleanup",
        OK,
        gettext_noop(
            "canary episodes, vectors, collections and snapshots removed; the probe's audit entries stay "
            "(actor system:health-probe)"
        ),
    )


def sweep_leftovers() -> None:
    """Remove what an earlier probe left behind when its process was killed outright."""
    cutoff = timezone.now() - LEFTOVER_AGE
    stale: set[str] = set()
    try:
        for user_key in vectors.list_collections().values():
            if user_key.startswith(PROBE_USER_KEY_PREFIX) and not Episode.objects.in_scope(user_key).exists():
                stale.add(user_key)
    except vectors.VectorIndexError:
        pass
    stale.update(
        Episode.objects.filter(user_key__startswith=PROBE_USER_KEY_PREFIX, created_at__lt=cutoff)
        .values_list("user_key", flat=True)
        .distinct()
    )
    stale.update(
        InjectionSnapshot.objects.filter(user_key__startswith=PROBE_USER_KEY_PREFIX, recorded_at__lt=cutoff)
        .values_list("user_key", flat=True)
        .distinct()
    )
    stale.update(
        EpisodeCounts.objects.filter(user_key__startswith=PROBE_USER_KEY_PREFIX, last_activity__lt=cutoff).values_list(
            "user_key", flat=True
        )
    )
    stale = {uk for uk in stale if uk.startswith(PROBE_USER_KEY_PREFIX) and ":" in uk}
    if stale:
        ordered = sorted(stale)
        try:
            remove_probe_data(ordered, ordered)  # session isolation: scope_key == user_key
        except Exception:
            log.exception("sweeping health probe leftovers failed")
