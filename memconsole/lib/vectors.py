"""The vector index (chromadb): one collection per user_key.

Why one collection per isolation key: a scope's search then only ever walks its own HNSW graph,
so it costs the same for a scope of 1,000 vectors in an index of millions as in an index of
1,000 (a single collection filtered with `where={"user_key": ...}` is measured at ~50 ms at
100,000 vectors), and a search cannot reach another scope's vectors by construction. Each vector
still carries its user_key in metadata; callers re-check it (and re-filter by user_key in SQL).

Collections are named from a hash of the user_key (Chroma names are limited to 63 plain
characters) and record the user_key and the embedding model id in their metadata. Searching a
collection made by another model raises `ModelMismatch`; `reindex` rebuilds it.

A model switch keeps copies of a scope's collection (vectorswitch.py): `upsert` and `query` go to
the copy of `model_id`; deletes, metadata updates, `all_ids`, `drop` and `vectorpurge.rebuild_collection` cover all.

The client is built lazily on first use, never at import time (so never before a fork): embedded
Chroma under CHROMA_PATH (`chromacache`: enough open files), or an `HttpClient` for CHROMA_HOST.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from . import chromafiles, metrics, vectorswitch

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
log = logging.getLogger("memconsole.vectors")

COLLECTION_PREFIX = "mc_"
SPACE = "cosine"
REBUILD_SUFFIX = "_rebuild"  # the temporary collection of `vectorpurge.rebuild_collection`


class VectorIndexError(Exception):
    """The vector index cannot be reached or refused an operation."""


class ModelMismatch(VectorIndexError):
    """A collection's vectors were made by another embedding model; run `manage.py reindex`."""


@dataclass(frozen=True)
class Hit:
    episode_id: str
    similarity: float
    metadata: dict[str, Any]


_lock = threading.Lock()
_client: Any = None
_client_config: tuple[Any, ...] | None = None
# Search handles of the current client by collection name (a lookup costs ~0.5 ms of a recall). A handle
# whose collection another process dropped or replaced fails its query; `query` then looks it up afresh.
_handles: dict[str, Any] = {}


def _config() -> tuple[Any, ...]:
    if settings.CHROMA_HOST:
        return ("http", settings.CHROMA_HOST, settings.CHROMA_PORT, settings.CHROMA_SSL)
    return ("embedded", str(settings.CHROMA_PATH))


def get_client() -> Any:
    """The process-wide chromadb client for the current settings, built on first use."""
    global _client, _client_config
    config = _config()
    with _lock:
        if _client is None or _client_config != config:
            # chromadb takes a second to import and brings its telemetry: processes that never touch
            # the index (migrate, most commands, the gunicorn master) import it at the first client.
            import chromadb  # noqa: PLC0415
            from chromadb.config import Settings as ChromaSettings  # noqa: PLC0415

            from .chromacache import persistent_client  # noqa: PLC0415  (the open-file limit raised first)

            chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
            try:
                if config[0] == "http":
                    _client = chromadb.HttpClient(
                        host=config[1], port=config[2], ssl=config[3], settings=chroma_settings
                    )
                else:
                    Path(config[1]).mkdir(parents=True, exist_ok=True)
                    _client = persistent_client(config[1], chroma_settings)
            except Exception as exc:  # chromadb raises plain Exceptions for connection failures
                raise VectorIndexError(f"cannot open the vector index ({describe()}): {exc}") from exc
            _client_config = config
            _handles.clear()
        return _client


def reset_client() -> None:
    """Forget the client (tests that switch index location, and after a fork)."""
    global _client, _client_config
    with _lock:
        _client = None
        _client_config = None
        _handles.clear()


def location() -> tuple[bool, str]:
    """(True, the server's URL) with a Chroma server, (False, its folder) with the embedded index."""
    config = _config()
    if config[0] == "http":
        return True, f"{'https' if config[3] else 'http'}://{config[1]}:{config[2]}"
    return False, str(config[1])


def describe() -> str:
    server, where = location()
    return f"Chroma server at {where}" if server else f"embedded Chroma at {where}"


def collection_name(user_key: str) -> str:
    return COLLECTION_PREFIX + hashlib.sha256(user_key.encode("utf-8")).hexdigest()[:40]


def _copies(user_key: str) -> list[Any]:
    return list(call("read", vectorswitch.copies, get_client(), collection_name(user_key)))


def _collection(user_key: str, model_id: str | None, create: bool) -> Any:
    client = get_client()
    name = collection_name(user_key)
    try:
        if create:
            collection = client.get_or_create_collection(
                name,
                embedding_function=None,
                configuration={"hnsw": {"space": SPACE}},
                metadata={"user_key": user_key, "model": model_id or ""},
            )
        else:
            collection = client.get_collection(name, embedding_function=None)
    except Exception as exc:
        if not create and type(exc).__name__ == "NotFoundError":
            return None
        raise VectorIndexError(f"vector index ({describe()}): {exc}") from exc
    _check_model(collection, model_id)
    return collection


def _check_model(collection: Any, model_id: str | None) -> None:
    stored_model = (collection.metadata or {}).get("model", "")
    if model_id and stored_model and stored_model != model_id:
        raise ModelMismatch(
            f"the vectors of this scope were made by embedding model {stored_model}, not the current "
            f"{model_id}; run `python manage.py reindex` to re-embed them"
        )


def call(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except VectorIndexError:
        raise
    except Exception as exc:
        raise VectorIndexError(f"vector index {what} failed ({describe()}): {exc}") from exc


@metrics.vector_index_call("write")
def upsert(user_key: str, model_id: str, ids: list[str], vectors: np.ndarray, metadatas: list[dict[str, Any]]) -> None:
    """Write vectors into the copy of `model_id` (created when missing, even for no `ids`)."""
    collection = call(
        "write", vectorswitch.write_target, get_client(), collection_name(user_key), user_key, model_id, SPACE
    )
    _check_model(collection, model_id)  # a staging copy of yet another model: the switch drops it first
    if not ids:
        return
    for meta in metadatas:
        if meta.get("user_key") != user_key:
            raise VectorIndexError("refusing to write a vector whose user_key is not its collection's")
    call("write", collection.upsert, ids=ids, embeddings=np.asarray(vectors, dtype=np.float32), metadatas=metadatas)


@metrics.vector_index_call("update")
def update_metadata(user_key: str, ids: list[str], metadatas: list[dict[str, Any]]) -> list[str]:
    """Update the metadata of those of `ids` that have a vector; returns the ids updated (the
    others have no vector to update: their rows need re-embedding)."""
    if not ids:
        return []
    updated: list[str] = []
    for collection in _copies(user_key):
        existing = set(call("read", collection.get, ids=ids, include=[])["ids"])
        pairs = [(i, m) for i, m in zip(ids, metadatas, strict=True) if i in existing]
        if pairs:
            call("update", collection.update, ids=[p[0] for p in pairs], metadatas=[p[1] for p in pairs])
        updated.extend(p[0] for p in pairs if p[0] not in updated)
    return updated


@metrics.vector_index_call("delete")
def delete(user_key: str, ids: list[str]) -> None:
    if not ids:
        return
    for collection in _copies(user_key):
        call("delete", collection.delete, ids=ids)


@metrics.vector_index_call("query")
def query(
    user_key: str,
    model_id: str,
    vector: np.ndarray,
    n_results: int,
    where: dict[str, Any] | None = None,
    include_metadata: bool = False,
) -> list[Hit]:
    """Nearest vectors in `user_key`'s collection. The collection must name `user_key` as its
    owner, or VectorIndexError; each vector's own metadata is read only with `include_metadata`
    (the isolation health check re-checks it per vector; recall need not pay ~2 ms for it)."""
    # No count() first: Chroma answers fewer (or no) results when the collection holds fewer than
    # n_results, and the extra round trip cost ~1 ms of every recall (bench/search.py).
    result = _searched(
        user_key,
        model_id,
        "search",
        lambda collection: collection.query(
            query_embeddings=np.asarray(vector, dtype=np.float32).reshape(1, -1),
            n_results=n_results,
            where=where,
            include=["distances", "metadatas"] if include_metadata else ["distances"],
        ),
    )
    if result is None:
        return []
    metadatas = result["metadatas"][0] if include_metadata else [None] * len(result["ids"][0])
    return [
        Hit(episode_id, 1.0 - float(distance), dict(meta or {}))
        for episode_id, distance, meta in zip(result["ids"][0], result["distances"][0], metadatas, strict=True)
    ]


@metrics.vector_index_call("read")
def nearest_among(user_key: str, model_id: str, vector: np.ndarray, ids: list[str], n_results: int) -> list[Hit]:
    """The `n_results` vectors of `ids` in `user_key`'s collection of `model_id` most similar to
    `vector`, by exact cosine similarity. For a few hundred ids (one speaker's episodes) reading
    their vectors costs a fraction of an HNSW search filtered by metadata (~2 ms against 20-60 ms
    in a 30,000-vector collection, bench/recall_quality.py), and misses none of them."""
    if not ids:
        return []
    result = _searched(user_key, model_id, "read", lambda c: c.get(ids=ids, include=["embeddings"]))
    matrix = read_vectors(result)
    if matrix is None:
        return []
    similarities = cosine(matrix, vector)
    best = np.argsort(-similarities, kind="stable")[:n_results]
    return [Hit(result["ids"][i], float(similarities[i]), {}) for i in best]


def read_vectors(result: Any) -> np.ndarray | None:
    """The vectors of a `get(include=["embeddings"])` answer, one row per id; None for no ids, or
    when the answer holds not one vector per id: embedded Chroma can list ids whose vectors are
    being written by another thread (the write-behind indexer), and those ids are then searched no
    more exactly than the index search does (seen as a crash of recall under load)."""
    if result is None or not result["ids"]:
        return None
    matrix = np.asarray(result["embeddings"] if result["embeddings"] is not None else [], dtype=np.float32)
    if matrix.ndim != 2 or len(matrix) != len(result["ids"]):
        log.warning(
            "the index answered %d ids with %s vectors: searched by the index alone", len(result["ids"]), matrix.shape
        )
        return None
    return matrix


def cosine(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """The cosine similarity of each row of `matrix` to `vector` (0 for a zero row)."""
    query_vector = np.asarray(vector, dtype=np.float32).reshape(-1)
    norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(query_vector)) or 1.0)
    return np.asarray((matrix @ query_vector) / np.where(norms == 0, 1.0, norms))


def _searched(user_key: str, model_id: str, what: str, read: Callable[[Any], Any]) -> Any:
    """`read(collection)` on the collection holding `model_id`'s vectors of `user_key`, None when
    there is none. A cached handle whose collection was dropped or replaced since fails: it is looked
    up again once."""
    name = collection_name(user_key)
    while True:
        collection, cached = _search_handle(user_key, model_id)
        if collection is None:
            return None
        try:
            result = read(collection)
        except Exception as exc:
            _handles.pop(name, None)
            if cached:
                continue
            raise VectorIndexError(f"vector index {what} failed ({describe()}): {exc}") from exc
        if collection.name == name:  # the serving collection (not a model switch's other copy)
            _handles[name] = collection
        return result


def _search_handle(user_key: str, model_id: str) -> tuple[Any, bool]:
    """The collection holding `model_id`'s vectors of `user_key` (None when there is none) and
    whether it came from the handle cache. Refuses a collection that names another owner."""
    name = collection_name(user_key)
    collection = _handles.get(name)
    if collection is not None and vectorswitch.model_of(collection) not in (model_id, ""):
        _handles.pop(name, None)  # promoted since (a model switch): look again
        collection = None
    cached = collection is not None
    if collection is None:
        try:
            collection = _collection(user_key, model_id, create=False)
        except ModelMismatch:
            # A model switch under way: the staging (or previous) collection holds this model.
            collection = call("read", vectorswitch.holding, get_client(), name, model_id)
            if collection is None:
                raise
        if collection is None:  # no serving collection (none yet, or between promote's renames)
            collection = call("read", vectorswitch.holding, get_client(), name, model_id)
            if collection is None:
                return None, False
    owner = (collection.metadata or {}).get("user_key")
    if owner != user_key:
        _handles.pop(name, None)
        raise VectorIndexError(
            f"refusing to search collection {collection.name}: it belongs to {owner or 'no scope'}, not this "
            "scope; run `python manage.py reindex`"
        )
    return collection, cached


@metrics.vector_index_call("read")
def all_ids(user_key: str, batch: int = 5000) -> list[str]:
    """Every vector id `user_key` holds, in any of its collections (serving, staging, previous)."""
    ids: dict[str, None] = {}  # in order, once each
    for collection in _copies(user_key):
        offset = 0
        while True:
            page = call("read", collection.get, include=[], limit=batch, offset=offset)["ids"]
            ids.update(dict.fromkeys(page))
            if len(page) < batch:
                break
            offset += batch
    return list(ids)


@metrics.vector_index_call("read")
def get(user_key: str, ids: list[str], include_embeddings: bool = False) -> dict[str, dict[str, Any]]:
    """{episode_id: {"metadata": ..., "embedding": ...}} for the ids present in the collection."""
    collection = _collection(user_key, None, create=False)
    if collection is None or not ids:
        return {}
    include = ["metadatas", "embeddings"] if include_embeddings else ["metadatas"]
    result = call("read", collection.get, ids=ids, include=include)
    out: dict[str, dict[str, Any]] = {}
    for position, episode_id in enumerate(result["ids"]):
        out[episode_id] = {"metadata": dict(result["metadatas"][position] or {})}
        if include_embeddings:
            out[episode_id]["embedding"] = np.asarray(result["embeddings"][position], dtype=np.float32)
    return out


def collection_model(user_key: str) -> str | None:
    collection = _collection(user_key, None, create=False)
    return None if collection is None else (collection.metadata or {}).get("model", "")


def staging_model(user_key: str) -> str | None:
    """The model of `user_key`'s staging collection (a model switch under way), or None."""
    staging = call("read", vectorswitch.named, get_client(), vectorswitch.names(collection_name(user_key))[1])
    return None if staging is None else vectorswitch.model_of(staging)


def promote(user_key: str) -> bool:
    """Make `user_key`'s staging collection the serving one (vectorswitch.promote)."""
    _handles.pop(collection_name(user_key), None)
    promoted = bool(call("rename", vectorswitch.promote, get_client(), collection_name(user_key)))
    _handles.pop(collection_name(user_key), None)
    return promoted


def list_collection_models() -> dict[str, tuple[str, str]]:
    """{collection name: (user_key, model id)} of every memconsole collection in the index."""
    return dict(call("list", vectorswitch.list_models, get_client(), COLLECTION_PREFIX))


@metrics.vector_index_call("drop")
def drop(user_key: str) -> None:
    """Delete `user_key`'s whole collection, and its staging and previous ones (segment files go with them)."""
    _handles.pop(collection_name(user_key), None)
    for name in vectorswitch.names(collection_name(user_key)):
        call("drop", vectorswitch.delete_named, get_client(), name)


def drop_collection(name: str) -> None:
    """Delete one memconsole collection by its name (e.g. the leftover of an interrupted rebuild)."""
    if not name.startswith(COLLECTION_PREFIX):
        raise VectorIndexError(f"refusing to drop {name!r}: not a memconsole collection")
    _handles.pop(name, None)
    try:
        get_client().delete_collection(name)
    except Exception as exc:
        if type(exc).__name__ != "NotFoundError":
            raise VectorIndexError(f"vector index drop failed ({describe()}): {exc}") from exc


def list_collections() -> dict[str, str]:
    """{collection name: user_key} of every memconsole collection in the index."""
    client = get_client()
    out = {}
    for collection in call("list", client.list_collections):
        if collection.name.startswith(COLLECTION_PREFIX):
            out[collection.name] = (collection.metadata or {}).get("user_key", "")
    return out


@metrics.vector_index_call("heartbeat")
def heartbeat() -> None:
    call("heartbeat", get_client().heartbeat)


def compact_storage() -> dict[str, Any]:
    """Remove what embedded Chroma keeps of deleted data on disk (erasure): orphaned segment
    folders and free pages of chroma.sqlite3 (`chromafiles.compact`). A Chroma server must be
    compacted on its own host; then this returns {"compacted": False}."""
    config = _config()
    if config[0] != "embedded":
        return {"compacted": False, "reason": f"{describe()} is compacted on its own host"}
    get_client()  # make sure Chroma has flushed its own state before we look at the file
    return chromafiles.compact(Path(config[1]))
