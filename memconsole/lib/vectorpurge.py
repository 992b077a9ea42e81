"""Finding what the vector index keeps of one person, for erasure (memory/erasure_index.py).

A vector's metadata carries its sender id: live vectors are found through Chroma's API (on a
server too); deleted ones, whose adds stay in embedded Chroma's log, through its files
(chromafiles.py). Kept beside vectors.py, which does the writing.
"""

from __future__ import annotations

from typing import Any

from . import chromafiles, vectors


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
