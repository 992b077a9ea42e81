"""The write-behind indexer: pending vectors (pending.py) into the vector index, in batches.

`drain()` takes the oldest pending vectors, writes them with one upsert per collection (their
metadata read from the rows as they are now), then, in one short transaction that locks those
rows, marks each episode current and deletes its pending row. Whatever changed meanwhile is
handled there: an episode deleted or erased since loses the vector just written; one whose status
or importance changed keeps its pending row and is written again at the next pass; one whose content
was edited meanwhile is embedded and written again at once. A vector made by another model than the
configured one (a model switch since the write), or from content edited since (`Episode.version`), is
never written: the episode is embedded again. Any other write of an episode's vector
(`sync.index_episodes`: an edit, `reindex`) deletes its pending row.

Who drains (MEMCONSOLE_INDEXER): `thread`, a daemon thread of every process that writes, woken by
each write and draining MEMCONSOLE_INDEX_DELAY_MS later (so that writes arriving together share a
batch), resting after each upsert three times as long as it took (`REST_PER_BUSY`), also at exit;
`worker`, the job worker (jobs/worker.py), polling every delay; `inline`, `remember` itself before
it returns. Whatever the mode, a thread or worker starting drains what a crash left, and `reindex`
drains first.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from memconsole.lib import embeddings, vectors

from . import modelswitch
from .errors import VectorIndexUnavailable, unavailable_on_failure
from .models import Episode
from .pending import to_vector
from .pending_models import PendingVector
from .sync import index_episodes, same_metadata, vector_metadata

__all__ = ["DrainReport", "Indexer", "after_write", "drain", "ensure_started", "mode", "stop"]

log = logging.getLogger("memconsole.indexer")

THREAD, WORKER, INLINE = "thread", "worker", "inline"
IDLE_SECONDS = 5.0  # a thread with nothing written still looks this often (another process's backlog)
RETRY_SECONDS = 5.0  # after the index refused a batch
# After each upsert, a thread rests this many times as long as the upsert took: embedded Chroma holds
# the GIL while it writes (~25 ms of CPU per upsert whatever its size), so the requests beside it
# wait at most one upsert, and the indexer keeps under 1/(1 + REST_PER_BUSY) of the process; under
# load its batches grow instead.
REST_PER_BUSY = 3.0

_drain_lock = threading.Lock()  # one drain at a time per process (several processes are safe)


def mode() -> str:
    return str(settings.MEMCONSOLE_INDEXER)


def delay_seconds() -> float:
    return int(settings.MEMCONSOLE_INDEX_DELAY_MS) / 1000


@dataclass
class DrainReport:
    indexed: int = 0
    reembedded: int = 0  # made by another model than the configured one: embedded again
    requeued: int = 0  # changed while being written: written again at the next pass
    gone: int = 0  # deleted while being written: its vector removed again

    def add(self, other: DrainReport) -> None:
        self.indexed += other.indexed
        self.reembedded += other.reembedded
        self.requeued += other.requeued
        self.gone += other.gone


def drain(
    limit: int | None = None, *, only: list[int] | None = None, pace: Callable[[float], None] | None = None
) -> DrainReport:
    """Write pending vectors into the index until none is left (or `limit` were taken; `only`: the
    pending rows of these episode pks; `pace`, called with each upsert's seconds, may rest after
    it). Raises `Unavailable` when the index or the model fails."""
    report = DrainReport()
    batch = int(settings.MEMCONSOLE_INDEX_BATCH)
    with _drain_lock, unavailable_on_failure():
        taken = 0
        while limit is None or taken < limit:
            rows = PendingVector.objects.order_by("pk")
            if only is not None:
                rows = rows.filter(episode_id__in=only)
            size = batch if limit is None else min(batch, limit - taken)
            chunk = list(rows[:size])
            if not chunk:
                break
            taken += len(chunk)
            done = _drain_batch(chunk, pace)
            report.add(done)
            if done.indexed + done.gone == 0 and done.requeued:
                break  # everything changed under us: the next pass (a moment later) writes it again
    return report


def _drain_batch(chunk: list[PendingVector], pace: Callable[[float], None] | None) -> DrainReport:
    report = DrainReport()
    model_id = embeddings.current_model_id()
    rows = {e.pk: e for e in Episode.objects.filter(pk__in=[p.episode_id for p in chunk])}
    waiting = [p for p in chunk if p.episode_id in rows]  # the others were deleted (and their rows too)
    # Never a vector of another model into this model's collection, nor one of an edited content.
    stale = [p for p in waiting if p.model_id != model_id or p.version != rows[p.episode_id].version]
    fresh = {p.episode_id: to_vector(p.vector) for p in waiting if p not in stale}
    if stale:
        again = embeddings.embed([rows[p.episode_id].content for p in stale])
        fresh.update({p.episode_id: again[i] for i, p in enumerate(stale)})
        report.reembedded += len(stale)
    by_key: dict[str, list[int]] = {}
    for p in waiting:
        by_key.setdefault(p.user_key, []).append(p.episode_id)
    written: dict[int, dict[str, Any]] = {}
    for user_key, pks in by_key.items():
        episodes = [rows[pk] for pk in pks]
        metas = [vector_metadata(e) for e in episodes]
        ids = [e.episode_id for e in episodes]
        started = time.monotonic()
        vectors.upsert(user_key, model_id, ids, np.vstack([fresh[pk] for pk in pks]), metas)
        modelswitch.write_serving(user_key, ids, [e.content for e in episodes], metas)
        written.update(zip(pks, metas, strict=True))
        if pace is not None:
            pace(time.monotonic() - started)
    gone: dict[str, list[str]] = {}
    with transaction.atomic():
        live = {e.pk: e for e in Episode.objects.filter(pk__in=list(written)).select_for_update()}
        edited = [live[pk] for pk in written if pk in live and live[pk].version != rows[pk].version]
        current = [
            pk
            for pk, meta in written.items()
            if pk in live and live[pk].version == rows[pk].version and same_metadata(meta, vector_metadata(live[pk]))
        ]
        for pk in written:
            if pk not in live:
                gone.setdefault(rows[pk].user_key, []).append(rows[pk].episode_id)
        Episode.objects.filter(pk__in=current).update(vector_current=True, vector_model=model_id)
        PendingVector.objects.filter(pk__in=[p.pk for p in waiting if p.episode_id in current]).delete()
    for user_key, ids in gone.items():  # deleted while it was being written: take it out again
        vectors.delete(user_key, ids)
    if edited:  # its content changed while it was being written: the vector just written may be the old one
        index_episodes(edited)
    report.indexed += len(current) + len(edited)
    report.gone += sum(len(ids) for ids in gone.values())
    report.requeued += len(live) - len(current) - len(edited)
    return report


def after_write(episodes: list[Episode], vectors_: np.ndarray) -> bool:
    """After the commit of episodes whose vectors were stashed: index them now (`inline`) or wake
    the indexer. False when `inline` and the index refused them (stored, found by recall from their
    pending vectors, indexed by the next drain or `reindex`)."""
    if mode() == INLINE:
        try:
            index_episodes(episodes, vectors_)
        except VectorIndexUnavailable:
            log.exception("%d episodes saved but not indexed; the next drain or `reindex` indexes them", len(episodes))
            return False
        return True  # (index_episodes deleted their pending vectors)
    if mode() == THREAD:
        ensure_started().wake()
    return True


class Indexer(threading.Thread):
    """The loop that drains: woken by writes (`wake`), or every `poll` seconds without one."""

    def __init__(self, poll: float) -> None:
        super().__init__(name="vector-indexer", daemon=True)
        self.poll = poll
        self.woken = threading.Event()
        self.stopped = threading.Event()
        self.first_pass = threading.Event()  # set once what was waiting at the start is drained

    def wake(self) -> None:
        self.woken.set()

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                self.once()
                self.first_pass.set()
                self.woken.wait(self.poll)
                if self.woken.is_set() and not self.stopped.wait(delay_seconds()):
                    self.woken.clear()  # writes arriving during the delay join this batch
        finally:
            connection.close()

    def rest(self, busy: float) -> None:
        """After an upsert that took `busy` seconds (see REST_PER_BUSY)."""
        self.stopped.wait(busy * REST_PER_BUSY)

    def once(self) -> None:
        try:
            done = drain(pace=self.rest)
        except Exception:  # the index or the database is down: the backlog waits, recall still finds it
            log.warning("write-behind indexing failed; retried in %.0f s", RETRY_SECONDS, exc_info=True)
            self.stopped.wait(RETRY_SECONDS)
            return
        if done.indexed or done.gone or done.requeued:
            log.debug(
                "indexed %d pending vectors (%d re-embedded, %d again later)",
                done.indexed,
                done.reembedded,
                done.requeued,
            )

    def stop(self, timeout: float = 30.0) -> None:
        self.stopped.set()
        self.woken.set()
        self.join(timeout)


_lock = threading.Lock()
_indexer: Indexer | None = None
_pid = 0


def ensure_started(poll: float | None = None) -> Indexer:
    """This process's indexer thread, started on first need (again after a fork)."""
    global _indexer, _pid
    with _lock:
        if _indexer is None or _pid != os.getpid() or not _indexer.is_alive():
            idle = max(delay_seconds(), 0.05) if mode() == WORKER else max(delay_seconds(), IDLE_SECONDS)
            wait = idle if poll is None else poll
            _indexer, _pid = Indexer(wait), os.getpid()
            _indexer.start()
        return _indexer


def stop(*, flush: bool = True) -> None:
    """Stop this process's indexer thread, and (`flush`) drain what is left once more."""
    global _indexer
    with _lock:
        running, _indexer = _indexer, None
    if running is not None and _pid == os.getpid():
        running.stop()
        if flush:
            try:
                drain()
            except Exception as exc:  # at exit: the next indexer to start drains it (no traceback: nothing is lost)
                log.warning("pending vectors left for the next start: %s", exc)
            finally:
                connection.close()


atexit.register(stop)
