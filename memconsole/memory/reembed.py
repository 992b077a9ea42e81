"""The re-embedding of a model switch, in the background of the serving process (docs/design.md §5).

`run(progress=...)` builds, scope by scope, the configured model's collection beside the one still
serving (vectors' staging copy), marks each row it re-embedded (`vector_model`), promotes the scope
once complete, and when every scope is done records the switch as finished. One process at a time
holds the lease (`EmbeddingState.lease_owner`, renewed every batch); a run killed half way leaves
its rows marked, so the next run continues where it stopped. `ensure_running()` starts it in a
daemon thread of this process on first need (recall, /readyz, a console page, `first_start`);
a job runner can call `run` itself.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from memconsole.lib import embeddings, vectors, vectorswitch

from . import modelswitch, tamper
from .embedding_state import CURRENT, EmbeddingState
from .errors import unavailable_on_failure
from .models import Episode
from .paging import batches_by_pk
from .scopes import PROBE_USER_KEY_PREFIX
from .sync import vector_metadata

log = logging.getLogger("memconsole.reembed")

EMBED_BATCH = 128
Progress = Callable[[str, int, int], None]


@dataclass
class ReembedReport:
    status: str  # "current" (nothing to do), "complete", "busy" (another process holds the lease), "stopped"
    model_id: str = ""
    reembedded: int = 0
    forged: int = 0  # rows changed outside memconsole, left out (tamper.Checker)
    scopes_promoted: int = 0
    episodes_done: int = 0
    episodes_total: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _owner() -> str:
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"


def take_lease(owner: str, seconds: int) -> bool:
    now = timezone.now()
    free = Q(lease_owner="") | Q(lease_expires__lt=now) | Q(lease_owner=owner)
    taken = EmbeddingState.objects.filter(free, pk=1).update(
        lease_owner=owner, lease_expires=now + timedelta(seconds=seconds)
    )
    return bool(taken)


def _release(owner: str) -> None:
    EmbeddingState.objects.filter(pk=1, lease_owner=owner).update(lease_owner="", lease_expires=None)


def run(
    progress: Progress | None = None, *, batch: int = EMBED_BATCH, lease_seconds: int | None = None, wait: bool = False
) -> ReembedReport:
    """Re-embed what the configured model has not embedded yet, and finish the switch.

    `progress(stage, done, total)` is called after every batch ("reembed", in episodes). With
    `wait`, waits for the lease another process holds (until it is released or expires). Raises
    `Unavailable` when the index or the model fails (the next run continues).
    """
    state = modelswitch.current()
    if not state.switching:
        return ReembedReport(CURRENT, state.model_id)
    seconds = lease_seconds or settings.MEMCONSOLE_REEMBED_LEASE_SECONDS
    owner = _owner()
    while not take_lease(owner, seconds):
        if not wait:
            return ReembedReport("busy", state.model_id)
        time.sleep(min(2.0, seconds / 4))
        modelswitch.forget()
        if not modelswitch.current().switching:
            return ReembedReport(CURRENT, state.model_id)
    try:
        with unavailable_on_failure():
            return _run(owner, seconds, batch, progress or (lambda stage, done, total: None))
    finally:
        _release(owner)
        modelswitch.forget()


def _scopes(target: str) -> list[str]:
    """Scopes with something to do: rows not embedded by `target`, a staging copy, or a serving
    collection of another model."""
    listing = vectors.list_collection_models()
    keys = {
        user_key
        for name, (user_key, model) in listing.items()
        if user_key
        and (
            name == vectorswitch.names(vectors.collection_name(user_key))[1]
            or (name == vectors.collection_name(user_key) and model not in ("", target))
        )
    }
    keys |= set(Episode.objects.exclude(vector_model=target).values_list("user_key", flat=True).distinct())
    return sorted(key for key in keys if not key.startswith(PROBE_USER_KEY_PREFIX))


def _run(owner: str, seconds: int, batch: int, notify: Progress) -> ReembedReport:
    state = EmbeddingState.objects.get(pk=1)
    target = state.model_id
    if embeddings.current_model_id() != target:
        return ReembedReport("stopped", target)
    report = ReembedReport("complete", target)
    checker = tamper.Checker()
    for _ in range(3):  # a pass, then again for what was written meanwhile
        work = _scopes(target)
        if not work:
            break
        pending = Episode.objects.filter(user_key__in=work).exclude(vector_model=target).count()
        state.episodes_total = state.episodes_done + pending
        state.scopes_total = state.scopes_done + len(work)
        state.save(update_fields=["episodes_total", "scopes_total"])
        for user_key in work:
            if not _scope(user_key, target, batch, state, report, owner, seconds, notify, checker):
                report.status = "stopped"
                return report
    for name in vectors.list_collections():
        if name.endswith(vectorswitch.PREVIOUS_SUFFIX):
            vectors.drop_collection(name)
    EmbeddingState.objects.filter(pk=1, model_id=target).update(
        status=CURRENT, serving_model_id="", finished_at=timezone.now(), episodes_done=state.episodes_total
    )
    embeddings.forget_previous()
    report.episodes_done = report.episodes_total = state.episodes_total
    log.info("model switch to %s complete: %s episodes re-embedded", target, report.reembedded)
    return report


def _scope(
    user_key: str,
    target: str,
    batch: int,
    state: EmbeddingState,
    report: ReembedReport,
    owner: str,
    seconds: int,
    notify: Progress,
    checker: tamper.Checker,
) -> bool:
    """Re-embed and promote one scope; False when the lease was lost or the target changed."""
    staging = vectors.staging_model(user_key)
    if staging not in (None, target):  # a copy of a switch abandoned for another model
        vectors.drop_collection(vectorswitch.names(vectors.collection_name(user_key))[1])
        staging = None
    serving = vectors.collection_model(user_key)
    rows = Episode.objects.in_scope(user_key)
    if not rows.exists():
        vectors.drop(user_key)
        return True
    if serving in (None, "", target) or staging is not None:
        rows = rows.exclude(vector_model=target)
    # else: the serving collection holds another model and there is no copy yet: every row.
    for rows_batch in batches_by_pk(rows, batch):
        # A row changed outside memconsole is not re-embedded (that would complete the forgery, as
        # in reindex); `memory_health` names it. The scope is promoted without its vector.
        forged = checker.forged(rows_batch)
        chunk = [episode for episode in rows_batch if episode.pk not in forged]
        report.forged += len(forged)
        if not chunk:
            continue
        vectors_ = embeddings.embed([episode.content for episode in chunk])
        vectors.upsert(
            user_key,
            target,
            [episode.episode_id for episode in chunk],
            np.asarray(vectors_),
            [vector_metadata(episode) for episode in chunk],
        )
        Episode.objects.filter(pk__in=[e.pk for e in chunk]).update(vector_current=True, vector_model=target)
        report.reembedded += len(chunk)
        state.episodes_done += len(chunk)
        state.save(update_fields=["episodes_done"])
        notify("reembed", state.episodes_done, state.episodes_total)
        if not take_lease(owner, seconds) or embeddings.current_model_id() != target:
            return False
    if serving not in (None, "", target) and vectors.promote(user_key):
        report.scopes_promoted += 1
    state.scopes_done += 1
    state.save(update_fields=["scopes_done"])
    return True


# --- in the background of the serving process ----------------------------------------------------

_thread_lock = threading.Lock()
_thread: threading.Thread | None = None


def ensure_running() -> bool:
    """Start the re-embedding in a daemon thread of this process when a switch is under way (and
    MEMCONSOLE_REEMBED_IN_BACKGROUND); True when one runs here."""
    global _thread
    if not settings.MEMCONSOLE_REEMBED_IN_BACKGROUND or not modelswitch.current().switching:
        return False
    with _thread_lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_background, name="memconsole-reembed", daemon=True)
            _thread.start()
    return True


def running_thread() -> threading.Thread | None:
    """The background re-embedding thread this process started, if any."""
    return _thread


def _background() -> None:
    try:
        while True:
            try:
                report = run()
            except Exception:  # the index or the model failed: log, wait, continue where it stopped
                log.exception("re-embedding failed; retrying in 30 s")
                time.sleep(30)
                continue
            if report.status != "busy":
                return
            time.sleep(settings.MEMCONSOLE_REEMBED_LEASE_SECONDS / 2)
    finally:
        connection.close()


def query_vector(user_key: str, text: str) -> tuple[str, np.ndarray]:
    """`modelswitch.query_vector`, starting the background re-embedding on first need."""
    ensure_running()
    return modelswitch.query_vector(user_key, text)


def banner() -> str:
    """The console banner during a model switch ("" otherwise): one read of the recorded state at
    most; while a switch is recorded, its re-embedding is started here too on first need."""
    try:
        state = modelswitch.peek()
        if state is None or not state.switching:
            return ""
        ensure_running()
        return modelswitch.describe(state)
    except Exception:  # a page must render even when the state or the model cannot be read
        log.warning("cannot read the embedding state for the banner", exc_info=True)
        return ""
