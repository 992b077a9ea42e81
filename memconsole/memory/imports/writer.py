"""Writing a resolved plan: one transaction, then the vectors after the commit.

The transaction writes the rows, the profiles with their versions, the counters and one audit
entry per scope. Vectors follow in batches; if the index fails, the rows stay marked not current
and `manage.py reindex` repairs them (the report says how many). A long import holds the
database's write lock for its transaction (SQLite), so large imports are best run off-peak.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from .. import audit, counters, facts, lexical, profiles, window
from ..audit import Actor
from ..episode_extras import EpisodeMetadata, metadata_row
from ..errors import Unavailable
from ..models import Episode
from ..paging import chunks
from ..scopes import register_scope
from ..sync import index_episodes
from .plan import EpisodeIn, Plan, Progress
from .report import ImportReport

log = logging.getLogger("memconsole.memory")

WRITE_BATCH = 500
INDEX_BATCH = 256


def write(plan: Plan, kept: list[EpisodeIn], report: ImportReport, actor: Actor, progress: Progress | None) -> None:
    """Write everything in one transaction (the vectors are `index`'s, after the commit)."""
    now = plan.imported_at
    with transaction.atomic():
        for keys in plan.scopes.values():
            register_scope(keys)
        written = 0
        for batch in chunks(kept, WRITE_BATCH):
            rows = Episode.objects.bulk_create([_row(item, now) for item in batch])  # pks set (RETURNING)
            lexical.index_episodes(rows)  # H3's contract: bulk_create skips the post_save receiver
            EpisodeMetadata.objects.bulk_create(
                [metadata_row(row, item.metadata) for row, item in zip(rows, batch, strict=True) if item.metadata]
            )
            written += len(batch)
            if progress:
                progress("writing", written, len(kept))
        for profile in plan.profiles:
            profiles.save_profile(
                profile.keys,
                actor,
                profile.type,
                profile.sender_id,
                profile.data,
                "import",
                f"{profile.type} profile imported ({report.format})",
                updated_at=profile.updated_at,
            )
        written_facts = facts.import_facts(plan.facts, actor)
        written_messages = window.import_messages(plan.messages)
        # The chain's head before the counters, in the order remember/archive/delete take them
        # (the other way round, an import and a remember deadlock on PostgreSQL).
        audit.lock_chain()
        for user_key in {keys.user_key for keys in plan.scopes.values()}:
            counters.recount(user_key)
        for keys in plan.scopes.values():
            scope = report.scope(keys)
            extras = report.scope_extras.get(keys.scope_key, {})
            audit.append(
                "import",
                actor,
                scope_key=keys.scope_key,
                user_key=keys.user_key,
                target_type="scope",
                target_id=keys.scope_key,
                summary=f"imported {scope['episodes']} episodes and {scope['profiles']} profiles ({report.format})",
                metadata={
                    "format": report.format,
                    "file_name": report.file_name,
                    "episodes": scope["episodes"],
                    "profiles": scope["profiles"],
                    "statuses": scope["statuses"],
                    "conflicts": scope["conflicts"],
                    "skipped_deleted": extras.get("skipped_deleted", 0),
                    "warnings": extras.get("warnings", 0),
                    **({"facts": written_facts, "messages": written_messages} if plan.facts or plan.messages else {}),
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
    for batch_ids in chunks(new_ids, INDEX_BATCH):
        batch = list(Episode.objects.filter(episode_id__in=batch_ids).order_by("pk"))
        try:
            done += index_episodes(batch)
        except Unavailable:
            log.exception("imported episodes saved but not all indexed; `manage.py reindex` will index them")
            break
        if progress:
            progress("indexing", done, len(new_ids))
    report.indexed = done
    report.not_indexed = len(new_ids) - done
