"""Finding what the vector index keeps of one person, and rebuilding the collections that kept it,
for erasure (memory/erasure_index.py).

A vector's metadata carries its sender id: live vectors are found through Chroma's API (on a
server too); deleted ones, whose adds stay in embedded Chroma's log, through its files
(chromafiles.py). A collection is purged by copying its live vectors into a new one
(`rebuild_collection`). Kept beside vectors.py, which does the everyday writing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import chromafiles, vectors, vectorswitch


def _memconsole_collections() -> list[Any]:
    try:
        collections = vectors.get_client().list_collections()
    except Exception as exc:  # chromadb raises plain Exceptions for connection failures
        raise vectors.VectorIndexError(f"vector index list failed ({vectors.describe()}): {exc}") from exc
    return [c for c in collections if c.name.startswith(vectors.COLLECTION_PREFIX)]


def ids_where(where: dict[str, Any]) -> dict[str, list[str]]:
    """{user_key: ids} of the live vectors whose metadata matches `where`, in every memconsole
    collection (every copy of a scope's collection)."""
    out: dict[str, list[str]] = {}
    for collection in _memconsole_collections():
        user_key = (collection.metadata or {}).get("user_key", "")
        try:
            found = collection.get(where=where, include=[])["ids"]
        except Exception as exc:
            raise vectors.VectorIndexError(f"vector index read failed ({vectors.describe()}): {exc}") from exc
        if user_key and found:
            out[user_key] = sorted(set(out.get(user_key, [])) | set(found))
    return out


def collections_mentioning(metadata: dict[str, str], ids: list[str]) -> set[str]:
    """user_keys of the memconsole collections whose stored log or metadata (embedded Chroma's
    chroma.sqlite3) holds a record with one of `ids` or one of `metadata`'s key/value pairs,
    deleted vectors included. Empty for a Chroma server (its files are on its host)."""
    client = vectors.get_client()
    root = chromafiles.persist_root(client)
    if root is None:
        return set()
    found = chromafiles.collections_mentioning(root / "chroma.sqlite3", metadata, ids)
    return {(c.metadata or {}).get("user_key", "") for c in _memconsole_collections() if str(c.id) in found} - {""}


def purge_orphan_log() -> int:
    """Delete embedded Chroma's log rows of collections that no longer exist; 0 for a server."""
    root = chromafiles.persist_root(vectors.get_client())
    return 0 if root is None else chromafiles.purge_orphan_log(root / "chroma.sqlite3")


def hnsw_files_holding(user_keys: list[str], needles: list[bytes]) -> list[str]:
    """Files of the HNSW folders of `user_keys`' collections (embedded Chroma) holding one of
    `needles`: erasure's last check. Empty for a Chroma server."""
    root = chromafiles.persist_root(vectors.get_client())
    if root is None:
        return []
    folders = [
        folder
        for c in _memconsole_collections()
        if (c.metadata or {}).get("user_key", "") in user_keys
        and (folder := chromafiles.vector_segment_folder(root, str(c.id))) is not None
    ]
    return chromafiles.files_holding(folders, needles)


def rebuild_collection(user_key: str, batch: int = 2000) -> int:
    """Copy `user_key`'s vectors into a fresh collection and drop the old one (erasure).

    chromadb's delete only marks vectors deleted inside the HNSW files; a copy holds only the
    live ones. Copies in batches into a temporary collection that is then renamed, so memory stays
    flat. Returns how many vectors were kept. Follow with `vectors.compact_storage()` on embedded Chroma.
    A model switch's staging copy (if any) is rebuilt too and its previous one dropped.
    """
    serving, staging, previous = vectorswitch.names(vectors.collection_name(user_key))
    kept = _rebuild_named(serving, batch)
    if vectors.call("read", vectorswitch.named, vectors.get_client(), staging) is not None:
        _rebuild_named(staging, batch)  # (same temporary name as the serving one's: one after the other)
    vectors.drop_collection(previous)
    return kept


def _rebuild_named(name: str, batch: int) -> int:
    old = vectors.call("read", vectorswitch.named, vectors.get_client(), name)
    temp_name = name[:40] + vectors.REBUILD_SUFFIX  # still a valid, memconsole-prefixed name of <= 63 characters
    if old is None:  # dropped by a rebuild killed before its rename: finish it (erasure's resume)
        return int(vectors.call("rename", chromafiles.finish_rename, vectors.get_client(), temp_name, name))
    client = vectors.get_client()
    vectors.drop_collection(temp_name)  # a leftover of an interrupted rebuild
    metadata = dict(old.metadata or {})
    temp = vectors.call(
        "create",
        client.create_collection,
        temp_name,
        embedding_function=None,
        configuration={"hnsw": {"space": vectors.SPACE}},
        metadata=metadata,
    )
    kept = 0
    offset = 0
    while True:
        page = vectors.call("read", old.get, include=["embeddings", "metadatas"], limit=batch, offset=offset)
        if not page["ids"]:
            break
        vectors.call(
            "write",
            temp.upsert,
            ids=page["ids"],
            embeddings=np.asarray(page["embeddings"], dtype=np.float32),
            metadatas=page["metadatas"],
        )
        kept += len(page["ids"])
        offset += len(page["ids"])
    vectors.drop_collection(name)
    vectors.call("rename", chromafiles.scrub_and_rename, client, temp, name)  # HNSW capacity written uninitialised
    return kept
