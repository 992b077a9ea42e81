"""Writing a resolved plan, then the vectors after the commit.

Two ways (`write`): without a checkpoint (the `import_memory` command), one transaction writes the
rows, the profiles with their versions, the counters and one audit entry per scope: all or nothing.
With a checkpoint (a background job's import, `jobkinds.run_import`), the episodes are written in
batches of JOB_BATCH, each its own transaction with its rows, lexical entries, metadata, counters,
an audit entry per scope it touched and the checkpoint (how many are written), so SQLite's one write
lock is released between batches and every other writer (a console request saving its session, a
bot's remember) gets in; a last transaction writes the profiles, facts, window messages and each
scope's summary audit entry, and marks the checkpoint `written`. A resumed attempt skips the
episodes an earlier one committed (their ids come from the plan's seed, `plan.Plan.id_seed`), and
one resumed after the last transaction only indexes. Vectors follow in batches; if the index
fails, the rows stay marked not current and `manage.py reindex` repairs them (the report says how
many).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from django.db import connection, transaction
from django.utils.translation import gettext_noop

from .. import audit, counters, facts, lexical, profiles, window
from ..audit import Actor
from ..episode_extras import EpisodeMetadata, metadata_row
from ..errors import Unavailable
from ..models import Episode
from ..paging import chunks
from ..scopes import ScopeKeys, register_scope
from ..sync import index_episodes
from ..wording import said
from .plan import EpisodeIn, Plan, Progress
from .report import ImportReport

log = logging.getLogger("memconsole.memory")

WRITE_BATCH = 500  # rows per INSERT in the one-transaction import
# Episodes per transaction of a batched import: small enough that a writer waiting for SQLite's lock
# waits about a second at most, large enough that the pauses between batches cost little.
JOB_BATCH = 200
INDEX_BATCH = 256
# After each batch on SQLite, the lock stays free this long: a writer waiting for it polls every
# 100 ms at most (SQLite's busy handler), so it gets in before the next batch takes the lock again.
SQLITE_PAUSE = 0.15


class Checkpoint(Protocol):
    """Where a batched import records how far it has got (a job's row): `state` is what the last
    committed batch saved ({} before the first); `save` runs inside each batch's transaction."""

    state: dict[str, Any]

    def save(self, state: dict[str, Any]) -> None: ...


def write(
    plan: Plan,
    kept: list[EpisodeIn],
    report: ImportReport,
    actor: Actor,
    progress: Progress | None,
    checkpoint: Checkpoint | None = None,
) -> None:
    """Write the plan: in one transaction, or in batches recorded in `checkpoint` (module docstring)."""
    if checkpoint is None:
        with transaction.atomic():
            for keys in plan.scopes.values():
                register_scope(keys)
            written = 0
            for batch in chunks(kept, WRITE_BATCH):
                _write_rows(batch, [_row(item, plan.imported_at) for item in batch])
                written += len(batch)
                if progress:
                    progress("writing", written, len(kept))
            _write_rest(plan, report, actor, plan.scopes.values())
        return
    state = {**checkpoint.state, "seed": plan.id_seed, "imported_at": plan.imported_at.isoformat()}
    todo = _not_written(kept) if state.get("episodes_written") else kept
    written = len(kept) - len(todo)
    if progress:
        progress("writing", written, len(kept))
    for batch in chunks(todo, JOB_BATCH):
        rows = [_row(item, plan.imported_at) for item in batch]  # built (and sealed) before taking the lock
        with transaction.atomic():
            scopes = {item.keys.scope_key: item.keys for item in batch}
            for keys in scopes.values():
                register_scope(keys)
            rows = _write_rows(batch, rows)
            _audit_batch(rows, scopes.values(), report, actor)
            written += len(batch)
            state["episodes_written"] = written
            checkpoint.save(state)
            if progress:
                progress("writing", written, len(kept))
        if connection.vendor == "sqlite":
            time.sleep(SQLITE_PAUSE)
    with transaction.atomic():
        for keys in plan.scopes.values():
            register_scope(keys)
        _write_rest(plan, report, actor, plan.scopes.values(), batched=True)
        checkpoint.save({**state, "written": True, "report": report.as_dict()})


def _not_written(kept: list[EpisodeIn]) -> list[EpisodeIn]:
    """The episodes of `kept` whose (seeded) ids are not in the database yet."""
    user_keys = sorted({item.keys.user_key for item in kept})
    there: set[str] = set()
    for batch in chunks([item.new_id for item in kept], WRITE_BATCH):
        there.update(
            Episode.objects.filter(user_key__in=user_keys, episode_id__in=batch).values_list("episode_id", flat=True)
        )
    return [item for item in kept if item.new_id not in there]


def _write_rows(batch: Sequence[EpisodeIn], rows: list[Episode]) -> list[Episode]:
    rows = Episode.objects.bulk_create(rows)  # pks set (RETURNING)
    lexical.index_episodes(rows)  # bulk_create sends no post_save, which indexes a saved row
    EpisodeMetadata.objects.bulk_create(
        [metadata_row(row, item.metadata) for row, item in zip(rows, batch, strict=True) if item.metadata]
    )
    return rows


def _audit_batch(rows: Sequence[Episode], scopes: Iterable[ScopeKeys], report: ImportReport, actor: Actor) -> None:
    """Counters and one audit entry per scope for a committed batch of a batched import. The rows
    were sealed before the transaction, where no row state is noted (`rowstate`): each entry names
    its scope's rows, so their states are recorded (tamper evidence) as in a one-transaction import."""
    scopes = list(scopes)
    audit.lock_chain(*(keys.scope_key for keys in scopes))  # the chains' heads before the counters (`_write_rest`)
    for user_key in sorted({keys.user_key for keys in scopes}):
        counters.recount(user_key)
    for keys in scopes:
        mine = [row for row in rows if row.scope_key == keys.scope_key]
        count = len(mine)
        audit.append(
            "import",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            target_type="scope",
            target_id=keys.scope_key,
            summary=said(
                gettext_noop("imported a batch of %(count)s episodes (%(format)s); the import goes on"),
                count=count,
                format=report.format,
            ),
            metadata={"format": report.format, "file_name": report.file_name, "batch_episodes": count},
            rows=mine,
        )


def _write_rest(
    plan: Plan, report: ImportReport, actor: Actor, scopes: Iterable[ScopeKeys], *, batched: bool = False
) -> None:
    """Profiles, facts, window messages, the counters and each scope's (summary) audit entry."""
    scopes = list(scopes)
    # Every chain this appends to, locked first and in order (a profile's entry locking one chain
    # while another import holds the next would deadlock on PostgreSQL), then the counters, in the
    # order remember/archive/delete take them (the other way round, an import and a remember deadlock).
    audit.lock_chain(*{keys.scope_key for keys in scopes}, *{profile.keys.scope_key for profile in plan.profiles})
    written_profiles: dict[str, int] = {}
    for profile in plan.profiles:
        current, row = profiles.get_profile(profile.keys, profile.type, profile.sender_id)
        if row is not None and profiles.unchanged(current, profile.data):
            continue  # as a live change that leaves it as it is: its version stays, nothing is audited
        profiles.save_profile(
            profile.keys,
            actor,
            profile.type,
            profile.sender_id,
            profile.data,
            "import",
            said(profiles.SAID[profile.type]["import"], format=report.format),
            updated_at=profile.updated_at,
        )
        written_profiles[profile.keys.scope_key] = written_profiles.get(profile.keys.scope_key, 0) + 1
    written_facts: dict[str, int] = {}
    for fact in plan.facts:  # one by one, in file order: a key given twice ends with the file's last value
        written_facts[fact.keys.scope_key] = written_facts.get(fact.keys.scope_key, 0) + facts.import_facts(
            [fact], actor
        )
    written_messages = window.import_messages(plan.messages)
    # What was written, whatever the plan foresaw (a bot's write may have come in between).
    report.profiles = sum(written_profiles.values())
    report.facts, report.messages = sum(written_facts.values()), sum(written_messages.values())
    for user_key in sorted({keys.user_key for keys in scopes}):
        counters.recount(user_key)
    for keys in scopes:
        scope = report.scope(keys)
        scope["profiles"] = written_profiles.get(keys.scope_key, 0)
        extras = report.scope_extras.get(keys.scope_key, {})
        audit.append(
            "import",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            target_type="scope",
            target_id=keys.scope_key,
            summary=said(
                gettext_noop("imported %(episodes)s episodes and %(profiles)s profiles (%(format)s)"),
                episodes=scope["episodes"],
                profiles=scope["profiles"],
                format=report.format,
            ),
            metadata={
                "format": report.format,
                "file_name": report.file_name,
                "episodes": scope["episodes"],
                "profiles": scope["profiles"],
                "statuses": scope["statuses"],
                "conflicts": scope["conflicts"],
                "skipped_deleted": extras.get("skipped_deleted", 0),
                "warnings": extras.get("warnings", 0),
                **({"batched": True} if batched else {}),
                **(
                    {"facts": written_facts.get(keys.scope_key, 0), "messages": written_messages.get(keys.scope_key, 0)}
                    if plan.facts or plan.messages
                    else {}
                ),
            },
        )


def _row(item: EpisodeIn, now: datetime) -> Episode:
    return Episode.create(
        item.keys,
        item.content,
        tags=item.tags,
        importance=item.importance,
        timestamp=item.timestamp,
        sender_id=item.sender_id,
        sender_name=item.sender_name,
        source="import",
        original_source=item.original_source,
        kind=item.kind,
        query_id=item.query_id,
        episode_id=item.new_id,
        status=item.status,
        superseded_by=item.superseded_by,
        imported_episode_id=item.old_id,
        created_at=now,
        updated_at=now,
        vector_current=False,
    )


def index(new_ids: list[str], report: ImportReport, progress: Progress | None) -> None:
    """Embed and index the new episodes in batches, after the commit."""
    done = 0
    if progress:
        progress("indexing", 0, len(new_ids))  # the rows are committed: the page says what runs now
    for batch_ids in chunks(new_ids, INDEX_BATCH):
        batch = list(Episode.objects.filter(episode_id__in=batch_ids).order_by("pk"))
        stale = [row for row in batch if not row.vector_current]  # a resumed job's may be indexed already
        try:
            done += len(batch) - len(stale) + (index_episodes(stale) if stale else 0)
        except Unavailable:
            log.exception("imported episodes saved but not all indexed; `manage.py reindex` will index them")
            break
        if progress:
            progress("indexing", done, len(new_ids))
    report.indexed = done
    report.not_indexed = len(new_ids) - done
