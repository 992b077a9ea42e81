"""What embedded Chroma (chromadb 1.5.x) keeps on disk, read and purged for erasure (vectors.py).

Under CHROMA_PATH, `chroma.sqlite3` holds every collection's write-ahead log (`embeddings_queue`:
each add, upsert and delete with its vector and its metadata as JSON, topic
`persistent://<tenant>/<database>/<collection id>`) and its metadata segment (`embeddings`,
`embedding_metadata`); each collection's HNSW index is a folder named by its vector segment's id.

What Chroma does not remove by itself, and this module does:
- the log is never trimmed for a live collection in 1.5.9 (`automatically_purge` notwithstanding,
  chroma-core/chroma#7659): a deleted vector's add stays in it with its metadata and embedding.
  Dropping the collection deletes its topic's rows, so erasure rebuilds every collection whose log
  or metadata mentions the person (`collections_mentioning`); rows of a topic whose collection is
  gone are deleted (`purge_orphan_log`).
- chroma-core/hnswlib writes a new index's files from `malloc`ed, uninitialised buffers
  (`initPersistentIndex` writes `max_elements × size_data_per_element` of `data_level0` and the
  `length` buffer whole), so whatever the process had freed before (another person's metadata,
  text) can land in the unused capacity of `data_level0.bin` and `length.bin`. Later writes only
  cover the elements in use. `scrub_unused_capacity` zeroes everything past the elements the
  header counts; it must run while nothing else writes that index (erasure calls it on its
  rebuild's temporary collection, which no one else knows yet).

Only for the embedded client; a Chroma server keeps these files on its own host (the functions
taking a client do nothing for one). Chroma's own errors pass through: vectors.py wraps its calls.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import struct
import uuid
from collections.abc import Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

LOCK_TIMEOUT = 30.0  # seconds to wait for Chroma's own writes to chroma.sqlite3
ID_BATCH = 500  # ids per IN (...) query
HEADER = struct.Struct("<iQQQQ")  # version, offsetLevel0, max_elements, cur_element_count, size_data_per_element
ZEROS = bytes(1 << 16)


def metadata_needle(key: str, value: str) -> str:
    """How `key: value` appears in a log row's metadata JSON (serde_json, like Python's compact form)."""
    return json.dumps({key: value}, ensure_ascii=False, separators=(",", ":"))[1:-1]


def _connect(database: Path) -> sqlite3.Connection:
    return sqlite3.connect(database, timeout=LOCK_TIMEOUT, isolation_level=None)


def _batches(values: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(values), ID_BATCH):
        yield values[start : start + ID_BATCH]


def _topic_collection(topic: str) -> str:
    return topic.rsplit("/", 1)[-1]


def collections_mentioning(database: Path, metadata: dict[str, str], ids: Iterable[str]) -> set[str]:
    """Ids of the collections whose log or metadata segment holds a record with one of `ids`, or
    with metadata `key: value` for one of `metadata`'s items (the log compared as JSON text)."""
    wanted = sorted(set(ids))
    found: set[str] = set()
    if not database.exists():
        return found
    with closing(_connect(database)) as connection:
        for key, value in sorted(metadata.items()):
            rows = connection.execute(
                "SELECT DISTINCT topic FROM embeddings_queue WHERE instr(metadata, ?) > 0",
                (metadata_needle(key, value),),
            )
            found.update(_topic_collection(row[0]) for row in rows)
            rows = connection.execute(
                "SELECT DISTINCT s.collection FROM embedding_metadata m JOIN embeddings e ON e.id = m.id "
                "JOIN segments s ON s.id = e.segment_id WHERE m.key = ? AND m.string_value = ?",
                (key, value),
            )
            found.update(row[0] for row in rows)
        for batch in _batches(wanted):
            marks = ",".join("?" * len(batch))
            rows = connection.execute(f"SELECT DISTINCT topic FROM embeddings_queue WHERE id IN ({marks})", batch)
            found.update(_topic_collection(row[0]) for row in rows)
            rows = connection.execute(
                f"SELECT DISTINCT s.collection FROM embeddings e JOIN segments s ON s.id = e.segment_id "
                f"WHERE e.embedding_id IN ({marks})",
                batch,
            )
            found.update(row[0] for row in rows)
    return found


def purge_orphan_log(database: Path) -> int:
    """Delete log rows whose collection no longer exists (nothing reads them); returns how many."""
    if not database.exists():
        return 0
    with closing(_connect(database)) as connection:
        live = {row[0] for row in connection.execute("SELECT id FROM collections")}
        topics = [row[0] for row in connection.execute("SELECT DISTINCT topic FROM embeddings_queue")]
        removed = 0
        for topic in topics:
            if _topic_collection(topic) not in live:
                removed += connection.execute("DELETE FROM embeddings_queue WHERE topic = ?", (topic,)).rowcount
        return removed


def vector_segment_folder(root: Path, collection_id: str) -> Path | None:
    """The HNSW folder of a collection (None before its first vector or without the database)."""
    database = root / "chroma.sqlite3"
    if not database.exists():
        return None
    with closing(_connect(database)) as connection:
        row = connection.execute(
            "SELECT id FROM segments WHERE collection = ? AND scope = 'VECTOR'", (collection_id,)
        ).fetchone()
    if row is None:
        return None
    folder = root / row[0]
    return folder if folder.is_dir() else None


def _zero_from(path: Path, start: int) -> int:
    size = path.stat().st_size
    if start >= size:
        return 0
    fd = os.open(path, os.O_WRONLY)
    try:
        position = start
        while position < size:
            position += os.pwrite(fd, ZEROS[: min(len(ZEROS), size - position)], position)
        os.fsync(fd)
    finally:
        os.close(fd)
    return size - start


def scrub_unused_capacity(folder: Path) -> int:
    """Zero the bytes of an HNSW folder's `data_level0.bin` and `length.bin` past the elements its
    header counts (uninitialised memory written at the index's creation); returns bytes zeroed.
    Only while no process writes this index."""
    header = folder / "header.bin"
    if not header.exists():
        return 0
    _, _, _, count, per_element = HEADER.unpack_from(header.read_bytes())
    zeroed = 0
    if (folder / "data_level0.bin").exists():
        zeroed += _zero_from(folder / "data_level0.bin", count * per_element)
    if (folder / "length.bin").exists():
        zeroed += _zero_from(folder / "length.bin", count * 4)
    return zeroed


def files_holding(folders: Iterable[Path], needles: Iterable[bytes]) -> list[str]:
    """Paths of the files in `folders` that contain any of `needles` (an erasure's last check)."""
    needles = [needle for needle in needles if needle]
    hits = []
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                data = path.read_bytes()
                if any(needle in data for needle in needles):
                    hits.append(str(path))
    return hits


def persist_root(client: Any) -> Path | None:
    """The folder of an embedded (persistent) client, None for a Chroma server."""
    chroma_settings = client.get_settings()
    return Path(chroma_settings.persist_directory) if chroma_settings.is_persistent else None


def scrub(client: Any, collection: Any) -> int:
    """`scrub_unused_capacity` on a collection's HNSW folder (embedded only); bytes zeroed."""
    root = persist_root(client)
    folder = None if root is None else vector_segment_folder(root, str(collection.id))
    return 0 if folder is None else scrub_unused_capacity(folder)


def scrub_and_rename(client: Any, temp: Any, name: str) -> None:
    """The last step of a rebuild: scrub the complete copy while no one else knows it, then give it
    the collection's name."""
    scrub(client, temp)
    temp.modify(name=name)


def finish_rename(client: Any, temp_name: str, name: str) -> int:
    """A rebuild killed after dropping the old collection left its complete copy under
    `temp_name` (the copy is complete before the drop): finish it; returns the vectors it holds,
    0 when there is no copy."""
    try:
        temp = client.get_collection(temp_name, embedding_function=None)
    except Exception as exc:
        if type(exc).__name__ in {"NotFoundError", "InvalidCollectionException"}:
            return 0
        raise
    scrub_and_rename(client, temp, name)
    return int(temp.count())


def compact(root: Path) -> dict[str, Any]:
    """Remove what embedded Chroma under `root` keeps of deleted data: a dropped collection leaves
    its HNSW segment folder behind (removed when no segment names it), and deleted rows stay in free
    pages of chroma.sqlite3 (embedding metadata and queued vectors: the file is vacuumed)."""
    database = root / "chroma.sqlite3"
    if not database.exists():
        return {"compacted": True, "removed_folders": 0}
    with closing(sqlite3.connect(database, timeout=LOCK_TIMEOUT)) as connection:
        live = {row[0] for row in connection.execute("SELECT id FROM segments")}
    removed = 0
    for path in root.iterdir():
        if path.is_dir() and path.name not in live and _looks_like_segment(path.name):
            shutil.rmtree(path)
            removed += 1
    with closing(sqlite3.connect(database, timeout=LOCK_TIMEOUT, isolation_level=None)) as connection:
        connection.execute("VACUUM")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {"compacted": True, "removed_folders": removed}


def _looks_like_segment(name: str) -> bool:
    try:
        uuid.UUID(name)
    except ValueError:
        return False
    return True
