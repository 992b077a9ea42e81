"""A safe switch of embedding model: which model serves recall while the index is re-embedded.

`EmbeddingState` (one row) records the model the index is built with (`model_id`, and the folder
each model was loaded from, so an earlier model can be loaded again), and during a switch the
model being built, the one still serving, and how far the re-embedding is (reembed.py builds it).

A switch is detected by `current()`: the configured model (`embeddings.current_model_id()`) is
not the recorded one. Until a scope's new collection is complete and promoted, its recall embeds
the query with the earlier model and searches its old collection (`query_vector`); when that
model's files are gone, the new model searches what is already re-embedded (and the lexical
signal of recall fills in). Writes go to the new model's collection and, while the old one
serves, to the old one too (`write_serving`), so nothing written during a switch is missed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.test.signals import setting_changed
from django.utils import timezone
from django.utils.translation import gettext as _

from memconsole.lib import embeddings, vectors

from .embedding_state import REEMBEDDING, EmbeddingState
from .errors import unavailable_on_failure
from .models import Episode

CACHE_SECONDS = 2.0


_cache_lock = threading.Lock()
_cache: dict[str, Any] = {}
_observing: ContextVar[bool] = ContextVar("memconsole_modelswitch_observing", default=False)


@contextmanager
def observing() -> Iterator[None]:
    """Within it `current()` reads the recorded state and records no switch: a health check run
    with other settings than the server's (a cron line without its MEMCONSOLE_MODEL_DIR) must not
    start a switch of the whole install (`recorded_elsewhere` says what differs)."""
    token = _observing.set(True)
    try:
        yield
    finally:
        _observing.reset(token)


def recorded_elsewhere() -> tuple[str, str] | None:
    """(the model this process is configured with, the model the install records) when they differ."""
    state = EmbeddingState.objects.filter(pk=1).first()
    target = embeddings.current_model_id()
    return (target, state.model_id) if state is not None and state.model_id != target else None


def _forget(**kwargs: Any) -> None:
    with _cache_lock:
        _cache.clear()
    embeddings.forget_previous()


setting_changed.connect(_forget, dispatch_uid="memconsole.modelswitch")


def forget() -> None:
    """Drop this process's cached state (a switch finished here, or tests changed settings)."""
    _forget()


def _index_model() -> str:
    """The model the index holds, for an install that never recorded it (the newest indexed row)."""
    return str(
        Episode.objects.exclude(vector_model="").order_by("-pk").values_list("vector_model", flat=True).first() or ""
    )


def model_folder() -> str:
    return str(Path(settings.MEMCONSOLE_MODEL_DIR))


def current() -> EmbeddingState:
    """The state for the configured model, detecting (and recording) a switch; cached ~2 s."""
    with unavailable_on_failure():
        target = embeddings.current_model_id()
    if _observing.get() and (recorded := EmbeddingState.objects.filter(pk=1).first()) is not None:
        return recorded
    now = time.monotonic()
    with _cache_lock:
        cached = _cache.get("state")
        if cached is not None and _cache.get("target") == target and now - _cache["at"] < CACHE_SECONDS:
            return cached  # type: ignore[no-any-return]
    state = _detect(target)
    with _cache_lock:
        _cache.update(state=state, target=target, at=now)
    return state


def peek() -> EmbeddingState | None:
    """The state as last recorded (this process's cached one, else one read), without detecting a
    switch: for every console page's banner (detection happens at start, recall and /readyz)."""
    with _cache_lock:
        cached = _cache.get("state")
        if cached is not None and time.monotonic() - _cache["at"] < CACHE_SECONDS:
            return cached  # type: ignore[no-any-return]
    return EmbeddingState.objects.filter(pk=1).first()


def _detect(target: str) -> EmbeddingState:
    # The first time: the model the index holds (an install older than this row), else this one.
    if not EmbeddingState.objects.filter(pk=1).exists():
        _state, new = EmbeddingState.objects.get_or_create(pk=1, defaults={"model_id": _index_model() or target})
    else:
        new = False
    state = EmbeddingState.objects.get(pk=1)
    fallback = embeddings.get_embedder().is_fallback
    if not new and state.model_id == target and (fallback or state.model_dirs.get(target) == model_folder()):
        return state  # nothing to record: no lock taken (the common case, every few seconds)
    with transaction.atomic():
        state = EmbeddingState.objects.select_for_update().get(pk=1)
        dirs = dict(state.model_dirs)
        if state.model_id == target:
            if dirs.get(target) != model_folder() and not embeddings.get_embedder().is_fallback:
                dirs[target] = model_folder()
                state.model_dirs = dirs
                new = True
            if new:
                state.save()
            return state
        # A switch: from the model serving now (the recorded one, or the one still serving an
        # interrupted switch) to the configured one.
        serving = state.serving_model_id if state.switching else state.model_id
        if not embeddings.get_embedder().is_fallback:
            dirs[target] = model_folder()
        state.model_dirs = dirs
        state.serving_model_id = serving
        state.model_id = target
        state.model_name = getattr(getattr(embeddings.get_embedder(), "spec", None), "name", "") or target
        state.status = REEMBEDDING
        state.episodes_total = state.episodes_done = state.scopes_total = state.scopes_done = 0
        state.started_at, state.finished_at, state.last_error = timezone.now(), None, ""
        state.save()
        return state


def _folders(state: EmbeddingState, model_id: str) -> list[Path]:
    spec = embeddings.spec_for_model_id(model_id)
    candidates = [state.model_dirs.get(model_id, "")]
    if spec is not None:
        candidates.append(str(Path(settings.VAR_DIR) / "models" / spec.name))
    candidates.append(model_folder())
    return [Path(c) for c in candidates if c]


def serving_embedder(state: EmbeddingState) -> Any:
    """The embedder of the model still serving during a switch, or None (its files are gone)."""
    if not state.switching or not state.serving_model_id:
        return None
    return embeddings.embedder_for(state.serving_model_id, _folders(state, state.serving_model_id))


def query_vector(user_key: str, text: str) -> tuple[str, np.ndarray]:
    """(model id, query vector) to search `user_key`'s index with: the configured model, or during
    a switch the model its serving collection still holds (while that model can be loaded)."""
    state = current()
    if state.switching:
        serving = vectors.collection_model(user_key)
        if serving not in (None, "", state.model_id):
            old = embeddings.embedder_for(serving, _folders(state, serving))
            if old is not None:
                return serving, old.embed([text], kind="query")[0]
            # That model's files are gone: search what is re-embedded (its copy, made now if need be).
            vectors.upsert(user_key, state.model_id, [], np.zeros((0, embeddings.DIMENSIONS), dtype=np.float32), [])
    return embeddings.current_model_id(), embeddings.embed_query([text])[0]


def write_serving(user_key: str, ids: list[str], texts: list[str], metadatas: list[dict[str, Any]]) -> None:
    """During a switch, also write new vectors into `user_key`'s collection still serving (its model)."""
    state = current()
    if not state.switching or not ids:
        return
    serving = vectors.collection_model(user_key)
    if serving in (None, "", state.model_id):
        return
    old = embeddings.embedder_for(serving, _folders(state, serving))
    if old is not None:
        vectors.upsert(user_key, serving, ids, old.embed(texts), metadatas)


def answering(state: EmbeddingState) -> str:
    """The model recall answers with: during a switch the earlier one while its files can be loaded,
    else (and after) the configured one, over what is re-embedded so far (`query_vector`)."""
    if state.switching and state.serving_model_id and serving_embedder(state) is not None:
        return state.serving_model_id
    return state.model_id


def status(state: EmbeddingState) -> dict[str, Any]:
    """What /readyz says: the model answering recall and how far a switch is."""
    out: dict[str, Any] = {"model": answering(state)}
    if state.switching:
        out["reembedding"] = {"to_model": state.model_id, "percent": state.percent}
    return out


def describe(state: EmbeddingState | None = None) -> str:
    """One sentence for the banner: the model answering and how far a switch is ("" when none)."""
    state = state or current()
    if not state.switching:
        return ""
    old = answering(state) if state.serving_model_id else _("the earlier index")
    return _(
        "The embedding model is changing to %(new)s: %(percent)s%% of the memory is re-embedded. "
        "Until it is done, recall answers with %(old)s."
    ) % {"new": state.model_id, "percent": state.percent, "old": old}


def error_note() -> str:
    """What the API's 503 adds during a model switch (in English, as the API's messages are)."""
    try:
        state = current()
    except Exception:  # the error being answered may be this very failure: say nothing more
        return ""
    if not state.switching:
        return ""
    return (
        f" (a model switch is under way: recall answers with "
        f"{answering(state) if state.serving_model_id else 'the earlier index'} "
        f"while {state.model_id} is re-embedded, {state.percent}% done)"
    )
