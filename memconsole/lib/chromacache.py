"""Embedded Chroma built with the process's open-file limit raised to its hard limit.

Embedded Chroma (1.5) keeps the search index of each collection it has used in memory, up to
`RLIMIT_NOFILE // 5` of them (`chromadb.api.rust.RustBindingsAPI.hnsw_cache_size`, read from the
soft open-file limit when the client is built), evicting the least recently used beyond that. An
index Chroma never wrote to disk (a collection below its `hnsw:sync_threshold`, 1,000 vectors by
default: every space of a chat bot for a long time) cannot be opened again once evicted: each later
search of that space fails with "Error creating hnsw segment reader: Nothing found on disk". With
the common soft limit of 1,024 (systemd's default) that is any process serving more than 204
spaces. So the soft limit is raised to the hard limit (capped at MAX_OPEN_FILES) before the client
is built, as servers commonly do: the cache then holds every space a process serves, at ~2.8 MB
per space of 100 episodes (docs/benchmarks.md, "Many spaces").
"""

from __future__ import annotations

import logging
import resource
from typing import Any

log = logging.getLogger("memconsole.vectors")

MAX_OPEN_FILES = 1_048_576  # a common container default, and Linux's usual nr_open
FILES_PER_INDEX = 5  # Chroma's divisor: each HNSW index has 4 data files and 1 metadata file


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (at most MAX_OPEN_FILES); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = MAX_OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, MAX_OPEN_FILES)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:  # a sandbox may refuse: Chroma then keeps fewer indexes
            log.warning("could not raise the open-file limit from %s to %s: %s", soft, target, exc)
            return soft
        return target
    return soft


def persistent_client(path: str, chroma_settings: Any) -> Any:
    """`chromadb.PersistentClient(path, settings)`, with the open-file limit raised first."""
    import chromadb  # noqa: PLC0415  (imported when the first client is built: see vectors.get_client)

    soft = raise_open_file_limit()
    if soft != resource.RLIM_INFINITY and soft // FILES_PER_INDEX < 1000:
        log.warning(
            "embedded Chroma keeps at most %s spaces' indexes open (open-file limit %s); a process serving "
            "more fails on the spaces evicted: raise the hard limit (ulimit -Hn) or use a Chroma server",
            soft // FILES_PER_INDEX,
            soft,
        )
    return chromadb.PersistentClient(path=path, settings=chroma_settings)
