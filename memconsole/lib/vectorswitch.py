"""The copies of a scope's vector collection during a model switch (memconsole/memory/reembed.py).

The new model's vectors of a scope are built in its *staging* collection (`<name>_next`) while the
serving one (`<name>`) keeps answering. `promote` then renames the serving one `<name>_prev` (kept
until the whole switch is done, for searches already holding it) and the staging one `<name>`.
vectors.py routes `upsert` and `query` to the copy holding a model's vectors and makes deletes,
metadata updates, `all_ids`, `drop` and erasure's rebuild cover every copy.

Chroma is reached through the client vectors.py passes in; vectors.py wraps every call (its
errors become `VectorIndexError` there), so this module imports nothing of it.
"""

from __future__ import annotations

from typing import Any

STAGING_SUFFIX = "_next"  # a model switch's new collection, until `promote`
PREVIOUS_SUFFIX = "_prev"  # the collection `promote` replaced, until the switch is done
NOT_FOUND = frozenset({"NotFoundError", "InvalidCollectionException"})


def names(serving: str) -> tuple[str, str, str]:
    """The serving, staging and previous collection names for a serving name (`mc_` + 40 hex)."""
    return serving, serving[:40] + STAGING_SUFFIX, serving[:40] + PREVIOUS_SUFFIX


def named(client: Any, name: str) -> Any:
    """The collection called `name`, or None."""
    try:
        return client.get_collection(name, embedding_function=None)
    except Exception as exc:
        if type(exc).__name__ in NOT_FOUND:
            return None
        raise


def model_of(collection: Any) -> str:
    return str((collection.metadata or {}).get("model", ""))


def copies(client: Any, serving: str) -> list[Any]:
    """Every existing copy: the serving collection, then the staging and previous ones."""
    found = [named(client, name) for name in names(serving)]
    return [collection for collection in found if collection is not None]


def holding(client: Any, serving: str, model_id: str) -> Any:
    """The copy holding `model_id`'s vectors, or None."""
    return next((c for c in copies(client, serving) if model_of(c) == model_id), None)


def write_target(client: Any, serving: str, user_key: str, model_id: str, space: str) -> Any:
    """Where a vector of `model_id` goes: the serving collection when it holds that model (or
    none), else the staging one (vectors.py refuses it when it holds yet another model); each is
    created when missing."""
    current = named(client, serving)
    if current is not None and model_of(current) in (model_id, ""):
        return current
    staging = named(client, names(serving)[1])
    if staging is not None:
        return staging
    return client.get_or_create_collection(
        serving if current is None else names(serving)[1],
        embedding_function=None,
        configuration={"hnsw": {"space": space}},
        metadata={"user_key": user_key, "model": model_id},
    )


def delete_named(client: Any, name: str) -> None:
    try:
        client.delete_collection(name)
    except Exception as exc:
        if type(exc).__name__ not in NOT_FOUND:
            raise


def promote(client: Any, serving: str) -> bool:
    """Make the staging collection the serving one; False when there is none. A search between
    the two renames finds the staging one (vectors.query looks there when the serving is missing)."""
    _, staging_name, previous_name = names(serving)
    staging = named(client, staging_name)
    if staging is None:
        return False
    delete_named(client, previous_name)
    current = named(client, serving)
    if current is not None:
        current.modify(name=previous_name)
    staging.modify(name=serving)
    return True


def list_models(client: Any, prefix: str) -> dict[str, tuple[str, str]]:
    """{collection name: (user_key, model id)} of every collection whose name starts with `prefix`."""
    out = {}
    for collection in client.list_collections():
        if collection.name.startswith(prefix):
            meta = collection.metadata or {}
            out[collection.name] = (str(meta.get("user_key", "")), str(meta.get("model", "")))
    return out
