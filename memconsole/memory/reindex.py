"""Find and repair drift between the database (the source of truth) and the vector index.

Drift comes from crashes between the database commit and the index write, an index restored
from an older backup, a model change, or hands on the index. `reindex` looks at every user_key
that has episodes or a collection and finds:

- episodes whose vector is not current (the row says so, or it was made by another model),
- episodes marked current whose vector is missing,
- vectors whose metadata no longer matches the row (status, importance, tags...),
- orphan vectors: no episode of that user_key has the id,
- collections for user_keys without episodes (an empty one, which forgetting a space's last
  episode leaves, is dropped by a repair but is not drift),
- collections made by another embedding model (dropped, and their episodes re-embedded),
- leftovers of an interrupted collection rebuild (`*_rebuild`, erasure): dropped.

Vectors waiting for the write-behind indexer (pending.py) are not drift: `check_only` counts them
apart (`pending`), and a repair run writes them first (`indexer.drain`).

With `check_only` it only counts. Otherwise it repairs, re-embedding in batches of a few hundred,
so that it runs in bounded memory at millions of rows and can be interrupted and run again.

Ordering matters for running beside live traffic: writes commit to the database first and then
to the index, so vector ids (and collections) are read *before* the rows they are compared with;
anything that looks orphaned is checked against the database again just before it is removed.
The health probe's own short-lived canary scopes are skipped (the probe cleans up after itself).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.db import transaction
from django.utils.translation import gettext_noop

from memconsole.lib import crypto, embeddings, vectors

from . import audit, indexer, lexical, tamper
from .audit import Actor
from .errors import Unavailable, unavailable_on_failure
from .models import Episode
from .paging import batches_by_pk, chunks
from .pending_models import PendingVector
from .reports import Report
from .scopes import PROBE_USER_KEY_PREFIX
from .sync import index_episodes, metadata_patch, same_metadata, vector_metadata
from .wording import said

EMBED_BATCH = 256
SCAN_BATCH = 1000
DELETE_BATCH = 500

Progress = Callable[[str, int, int], None]

# What `sync.vector_metadata` and the currency test read; nothing else is loaded in a scan.
SCAN_FIELDS = (
    "episode_id",
    "user_key",
    "status",
    "sender_id",
    "importance",
    "timestamp",
    "tags",
    "encrypted",
    "vector_current",
    "vector_model",
)


@dataclass
class ReindexReport(Report):
    check_only: bool
    model_id: str = ""
    scopes: int = 0
    episodes: int = 0
    vectors: int = 0
    not_current: int = 0
    missing: int = 0
    stale: int = 0
    orphans: int = 0
    orphan_collections: int = 0
    foreign_model_collections: int = 0
    reembedded: int = 0
    metadata_fixed: int = 0
    orphans_deleted: int = 0
    collections_dropped: int = 0
    lexical_missing: int = 0  # episodes without a lexical index entry (memory/lexical.py)
    lexical_stale_scopes: int = 0  # scopes whose entries were hashed with another key
    lexical_rebuilt: int = 0
    pending: int = 0  # episodes whose vector waits for the write-behind indexer: not drift (indexer.py)
    drained: int = 0  # ... of which a repair run wrote first
    errors: list[str] = field(default_factory=list)
    duration_ms: int = 0

    @property
    def drift(self) -> int:
        """How many things were found out of step (0 = the index matches the database)."""
        return (
            self.not_current
            + self.missing
            + self.stale
            + self.orphans
            + self.orphan_collections
            + self.foreign_model_collections
            + self.lexical_missing
            + self.lexical_stale_scopes
        )

    @property
    def ok(self) -> bool:
        return not self.errors and (self.drift == 0 or not self.check_only)

    def describe_drift(self) -> str:
        parts = []
        for count, what in (
            (self.not_current, "episodes without a current vector"),
            (self.missing, "episodes whose vector is missing"),
            (self.stale, "vectors with stale metadata"),
            (self.orphans, "orphan vectors (no episode)"),
            (self.orphan_collections, "collections of scopes without episodes"),
            (self.foreign_model_collections, "collections made by another embedding model"),
            (self.lexical_missing, "episodes missing from the lexical index"),
            (self.lexical_stale_scopes, "scopes whose lexical entries were made with another key"),
        ):
            if count:
                parts.append(f"{count} {what}")
        return ", ".join(parts) if parts else "no drift"

    def summary(self) -> str:
        head = (
            f"{self.scopes} scopes, {self.episodes} episodes, {self.vectors} vectors checked "
            f"in {self.duration_ms / 1000:.1f}s: {self.describe_drift()}"
        )
        if self.pending or self.drained:
            head += f" ({self.drained} pending vectors written first, {self.pending} waiting for the indexer)"
        if not self.check_only and self.drift:
            head += (
                f"; repaired: {self.reembedded} re-embedded, {self.metadata_fixed} metadata fixed, "
                f"{self.orphans_deleted} orphan vectors deleted, {self.collections_dropped} collections dropped"
            )
        if self.errors:
            head += f"; {len(self.errors)} errors (first: {self.errors[0]})"
        return head

    JSON_KEYS: ClassVar[tuple[str, ...]] = (
        "check_only",
        "model_id",
        "scopes",
        "episodes",
        "vectors",
        "drift",
        "not_current",
        "missing",
        "stale",
        "orphans",
        "orphan_collections",
        "foreign_model_collections",
        "reembedded",
        "metadata_fixed",
        "orphans_deleted",
        "collections_dropped",
        "pending",
        "drained",
        "errors",
        "duration_ms",
        "summary",
    )


@dataclass
class _ScopePlan:
    """What one user_key needs (primary keys of rows, ids of vectors)."""

    user_key: str
    embed: list[int] = field(default_factory=list)
    fix_metadata: list[int] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    drop_collection: bool = False  # no episodes, or made by another model

    @property
    def empty(self) -> bool:
        return not (self.embed or self.fix_metadata or self.orphans or self.drop_collection)


def reindex(check_only: bool, progress: Progress | None = None, actor: Actor | None = None) -> ReindexReport:
    """Compare every vector with the database and (unless `check_only`) repair the index; a repair
    run is audited (`index_repair`, by `actor`).

    `progress(stage, done, total)` is called as scopes are scanned ("scan") and as repairs go
    ("repair", counted in rows and vectors). Raises `Unavailable` when the index cannot be
    reached at all; per-batch failures during repair are collected in `errors`.
    """
    with unavailable_on_failure():
        report = _reindex(check_only, progress)
    if not check_only:
        with transaction.atomic():
            audit.append(
                "index_repair",
                actor or Actor.system("reindex"),
                target_type="index",
                summary=said(gettext_noop("search index repaired: %(report)s"), report=report.summary()),
            )
    return report


def _reindex(check_only: bool, progress: Progress | None) -> ReindexReport:
    started = time.monotonic()
    report = ReindexReport(check_only=check_only, model_id=embeddings.current_model_id())
    notify = progress or (lambda stage, done, total: None)
    skip = PROBE_USER_KEY_PREFIX
    if not check_only:  # the write-behind backlog first: what a crash left, and what is waiting
        report.drained = _guard_drain(report)

    # Collections first, then the database (see the module docstring).
    collections = vectors.list_collections()
    # A rebuild's temporary copy (erasure) left by a rebuild that failed or was interrupted: its
    # scope's rows were marked not current before the rebuild, so they are re-embedded below.
    leftovers = sorted(name for name in collections if name.endswith(vectors.REBUILD_SUFFIX))
    report.orphan_collections += len(leftovers)
    collection_keys = {
        uk for name, uk in collections.items() if uk and not uk.startswith(skip) and name not in leftovers
    }
    episode_keys = set(Episode.objects.exclude(user_key__startswith=skip).values_list("user_key", flat=True).distinct())
    user_keys = sorted(collection_keys | episode_keys)
    report.scopes = len(user_keys)

    plans = []
    for position, user_key in enumerate(user_keys, start=1):
        plan = _scan_scope(user_key, user_key in episode_keys, report)
        if not plan.empty:
            plans.append(plan)
        notify("scan", position, len(user_keys))

    if not check_only:
        for name in leftovers:
            if _guard(report, f"dropping the rebuild leftover {name}", vectors.drop_collection, name):
                report.collections_dropped += 1
    if not check_only and plans:
        _refuse_forged(plans, report)
        total = sum(len(p.embed) + len(p.fix_metadata) + len(p.orphans) + p.drop_collection for p in plans)
        done = 0
        for plan in plans:
            done = _repair_scope(plan, report, notify, done, total)
    # The lexical index lives in the database, in step with every row; rebuilt when it is not.
    report.lexical_missing, report.lexical_stale_scopes = lexical.missing_count(), len(lexical.stale_scopes())
    if not check_only and (report.lexical_missing or report.lexical_stale_scopes):
        report.lexical_rebuilt = lexical.rebuild()
    report.duration_ms = int((time.monotonic() - started) * 1000)
    return report


def _scan_scope(user_key: str, has_episodes: bool, report: ReindexReport) -> _ScopePlan:
    plan = _ScopePlan(user_key)
    collection_model = vectors.collection_model(user_key)  # None: no collection
    foreign = collection_model not in (None, "", report.model_id)
    if collection_model is not None and not has_episodes:
        # Re-checked against the database before anything is dropped. An empty one is what
        # forgetting a space's last episode leaves: tidied by a repair, but not drift.
        stranded = len(vectors.all_ids(user_key))
        report.orphan_collections += bool(stranded)
        report.vectors += stranded
        plan.drop_collection = True
        return plan
    if foreign:
        report.foreign_model_collections += 1
        plan.drop_collection = True
    vector_ids = set() if collection_model is None else set(vectors.all_ids(user_key))
    report.vectors += len(vector_ids)

    seen: set[str] = set()
    # Waiting for the indexer, with a vector of this model: the indexer writes it (not drift).
    waiting = set(
        PendingVector.objects.filter(user_key=user_key, model_id=report.model_id).values_list("episode_id", flat=True)
    )
    rows = Episode.objects.in_scope(user_key).only(*SCAN_FIELDS)
    for chunk in batches_by_pk(rows, SCAN_BATCH):
        present = {} if foreign else vectors.get(user_key, [e.episode_id for e in chunk if e.episode_id in vector_ids])
        for episode in chunk:
            seen.add(episode.episode_id)
            report.episodes += 1
            if not foreign and episode.pk in waiting:
                report.pending += 1
            elif foreign or not episode.vector_current or episode.vector_model != report.model_id:
                report.not_current += 1
                plan.embed.append(episode.pk)
            elif episode.episode_id not in present:
                report.missing += 1
                plan.embed.append(episode.pk)
            elif not same_metadata(present[episode.episode_id]["metadata"], vector_metadata(episode)):
                report.stale += 1
                plan.fix_metadata.append(episode.pk)
    if not foreign:
        plan.orphans = sorted(vector_ids - seen)
        report.orphans += len(plan.orphans)
    return plan


def _refuse_forged(plans: list[_ScopePlan], report: ReindexReport) -> None:
    """Take rows changed outside memconsole (`tamper`) out of the plans: re-indexing them would
    complete the forgery. Each is named in `errors`, with why."""
    checker = tamper.Checker()
    for plan in plans:
        for pks in (plan.embed, plan.fix_metadata):
            forged: dict[int, str] = {}
            for batch in chunks(pks, SCAN_BATCH):
                rows = list(tamper.loaded(Episode).filter(pk__in=batch))
                forged.update(checker.forged(rows))
                for row in rows:
                    if row.pk in forged:
                        report.errors.append(f"refused to re-index {tamper.row_name(row)}: {forged[row.pk]}")
            pks[:] = [pk for pk in pks if pk not in forged]


def _repair_scope(plan: _ScopePlan, report: ReindexReport, notify: Progress, done: int, total: int) -> int:
    user_key = plan.user_key
    if plan.drop_collection:
        if plan.embed:
            # Made by another model: mark every row first, so that a crash from here on leaves
            # them to the next reindex, then rebuild the collection from scratch.
            Episode.objects.in_scope(user_key).update(vector_current=False)
            _guard(report, f"dropping {user_key}", vectors.drop, user_key)
            report.collections_dropped += 1
        elif not Episode.objects.in_scope(user_key).exists() and _guard(
            report, f"dropping {user_key}", vectors.drop, user_key
        ):
            report.collections_dropped += 1
        done += 1
        notify("repair", done, total)

    for batch in chunks(plan.embed, EMBED_BATCH):
        rows = list(Episode.objects.in_scope(user_key).filter(pk__in=batch).order_by("pk"))
        if rows and _guard(report, f"re-embedding {len(rows)} episodes of {user_key}", _embed, rows):
            report.reembedded += len(rows)
        done += len(batch)
        notify("repair", done, total)

    for batch in chunks(plan.fix_metadata, DELETE_BATCH):
        rows = list(Episode.objects.in_scope(user_key).filter(pk__in=batch).only(*SCAN_FIELDS))
        if rows and _guard(report, f"fixing metadata of {len(rows)} vectors of {user_key}", _fix_metadata, rows):
            report.metadata_fixed += len(rows)
        done += len(batch)
        notify("repair", done, total)

    for ids in chunks(plan.orphans, DELETE_BATCH):
        alive = set(Episode.objects.in_scope(user_key).with_ids(ids).values_list("episode_id", flat=True))
        doomed = [episode_id for episode_id in ids if episode_id not in alive]
        if doomed and _guard(
            report, f"deleting {len(doomed)} orphan vectors of {user_key}", vectors.delete, user_key, doomed
        ):
            report.orphans_deleted += len(doomed)
        done += len(ids)
        notify("repair", done, total)
    return done


def _guard_drain(report: ReindexReport) -> int:
    try:
        return indexer.drain().indexed
    except Unavailable as exc:
        report.errors.append(f"writing the pending vectors: {exc}")
        return 0


def _guard(report: ReindexReport, what: str, fn: Callable[..., Any], *args: Any) -> bool:
    try:
        fn(*args)
    except (vectors.VectorIndexError, crypto.DecryptionError, embeddings.EmbeddingError) as exc:
        report.errors.append(f"{what}: {exc}")
        return False
    return True


def _embed(rows: list[Episode]) -> None:
    user_key = rows[0].user_key
    before = vectors.get(user_key, [e.episode_id for e in rows])
    index_episodes(rows)
    # Upsert merges metadata: remove keys the row no longer has (e.g. tags once encrypted).
    patches = [
        (e.episode_id, metadata_patch(before[e.episode_id]["metadata"], vector_metadata(e)))
        for e in rows
        if e.episode_id in before and set(before[e.episode_id]["metadata"]) - set(vector_metadata(e))
    ]
    if patches:
        vectors.update_metadata(user_key, [p[0] for p in patches], [p[1] for p in patches])


def _fix_metadata(rows: list[Episode]) -> None:
    user_key = rows[0].user_key
    current = vectors.get(user_key, [e.episode_id for e in rows])
    ids, metas = [], []
    for episode in rows:
        if episode.episode_id in current:
            ids.append(episode.episode_id)
            metas.append(metadata_patch(current[episode.episode_id]["metadata"], vector_metadata(episode)))
    vectors.update_metadata(user_key, ids, metas)
