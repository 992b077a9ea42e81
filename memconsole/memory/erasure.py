"""Erasure of one person (docs/design.md §6, issue 5).

`erase_subject(sender_id)` removes, across every scope (or every scope of one bot):
- their speaker profiles, with every version;
- the episodes they sent, from the database and the vector index;
- the injection snapshots where they were the speaker, and their episodes inside other
  snapshots (the episode list and the rendered "Relevant memories" block are rewritten);
- their content in the audit log: every entry about them (sender_id = theirs, their profile or
  their episodes; never an entry whose payload merely contains their id as a string, such as
  `{"status": "active"}` for the id `active`) gets its payload redacted, and the structural fields
  that name them (sender_id, target_id "speaker:<id>" or a fact's "<id>\x1f<key>") are replaced by a keyed digest
  (`audit.erase_identifiers`); the chain still verifies;
- the files of ended imports kept for `resume_job` that hold them (`erasure_imports`; an import
  still queued or running whose file holds them stops the erasure first);
and writes one audited receipt with the counts, naming the person only by that keyed digest.

Deleting is not enough to remove bytes from disk, so afterwards (erasure_index.py, journaled: a
run killed half way is finished by running it again, or `erase_subject --resume`):
- each vector collection that held their vectors is rebuilt (a copy of the remaining vectors
  replaces it: chromadb's delete only marks HNSW entries deleted, and keeps the vector's add in its
  log), found by their database rows, by their sender id in live vectors and, with embedded
  Chroma, in its log and metadata tables; embedded Chroma is then compacted (log rows of dropped
  collections deleted, orphaned segment folders removed, chroma.sqlite3 vacuumed) and checked;
- a SQLite database is vacuumed and its WAL truncated. On PostgreSQL, deleted row versions stay in
  the table files until `VACUUM FULL` (not run automatically: it locks the tables); backups and
  WAL archives are outside memconsole's reach. A Chroma server is compacted on its own host.

Limits: content that *other* people wrote about the person, and session names that embed their id
(LangBot's `person_<id>` sessions), are not found by sender id; erase such a scope as a whole. With
embedded Chroma, run erasure where the web server runs (the console action) or stop the server
first: two processes must not write one Chroma folder. `dry_run=True` counts and writes nothing.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Max, Q, QuerySet
from django.db.models.functions import Substr
from django.db.models.lookups import Exact
from django.utils import timezone
from django.utils.translation import gettext_noop

from . import audit, corrections, editing, erasure_imports, erasure_index, facts, paging, redactions
from .audit import Actor
from .counters import recount
from .episodes import restore
from .erasure_index import compact_database
from .erasure_journal import ErasureJournal
from .erasure_snapshots import snapshots_to_rewrite
from .errors import PermissionDenied, ValidationError, unavailable_on_failure
from .models import PROFILE_SPEAKER, AuditEntry, Episode, InjectionSnapshot, Profile, ProfileVersion
from .paging import chunks
from .reports import Report
from .scopes import RESERVED_BOT_UUID
from .validation import MAX_SENDER_CHARS, trimmed, validate_speaker
from .wording import counted, said

log = logging.getLogger("memconsole.memory")

BATCH = 1000
CORRECTION_ERASED = {"reason": "the correction that superseded it was erased"}


@dataclass
class ErasureReport(Report):
    dry_run: bool
    subject_digest: str = ""
    bot_uuid: str = ""
    episodes: int = 0
    profiles: int = 0
    profile_versions: int = 0
    snapshots_deleted: int = 0
    snapshots_redacted: int = 0
    audit_redacted: int = 0
    facts: int = 0  # keyed facts about the person, and window messages they sent (issue 20)
    messages: int = 0
    scopes: int = 0
    import_files: int = 0  # kept files of ended imports that held the person, deleted (erasure_imports)
    import_report_items: int = 0  # items about them in import jobs' reports, removed (erasure_imports)
    collections_rebuilt: int = 0
    vector_index: dict[str, Any] = field(default_factory=dict)
    database: dict[str, Any] = field(default_factory=dict)
    receipt_audit_id: str = ""
    resumed: bool = False  # an unfinished erasure of the same subject was finished by this run

    @property
    def total(self) -> int:
        counts = self.episodes, self.profiles, self.snapshots_deleted, self.snapshots_redacted, self.audit_redacted
        return sum(counts) + self.facts + self.messages + self.import_files

    def summary(self) -> str:
        verb = "would erase" if self.dry_run else "erased"
        text = (
            f"{verb} {self.episodes} episodes, {self.profiles} speaker profiles ({self.profile_versions} versions), "
            f"{self.snapshots_deleted} snapshots; {'would redact' if self.dry_run else 'redacted'} "
            f"{self.snapshots_redacted} snapshots and {self.audit_redacted} audit entries"
            + (f"; {self.facts} facts and {self.messages} window messages" if self.facts or self.messages else "")
            + (f"; {verb} {self.import_files} kept import files" if self.import_files else "")
            + (f"; {verb} {self.import_report_items} items of import reports" if self.import_report_items else "")
        )
        return text + ("" if self.dry_run else f"; {self.collections_rebuilt} vector collections rebuilt")


def _check(sender_id: Any, bot_uuid: Any, actor: Actor) -> tuple[str, str]:
    if not isinstance(sender_id, str) or not trimmed(sender_id):
        raise ValidationError("sender_id is required", field="sender_id")
    if len(sender_id) > MAX_SENDER_CHARS or "\x00" in sender_id:
        raise ValidationError("sender_id is not a valid sender id", field="sender_id")
    sender_id = validate_speaker(sender_id)  # as every write stores it: "\ufeffu7" is u7
    if bot_uuid is not None and not isinstance(bot_uuid, str):
        raise ValidationError("bot_uuid must be a string", field="bot_uuid")
    bot_uuid = (bot_uuid or "").strip()
    if ":" in bot_uuid:
        raise ValidationError("bot_uuid may not contain ':'", field="bot_uuid")
    if actor.bot_uuids is not None and (not bot_uuid or not actor.may_use_bot(bot_uuid)):
        raise PermissionDenied("this actor may only erase within its own bots (give one of them)")
    return sender_id, bot_uuid


def _scope_key_in_bot(bot_uuid: str, field: str = "scope_key") -> Q:
    """Rows whose scope_key (`<bot>:<session>`, or another field holding one) belongs to one bot ('' = every
    bot). Compared exactly: `startswith`'s LIKE ignores case on SQLite (`rt-case-bot` reaching `RT-CASE-BOT`)."""
    if not bot_uuid:
        return Q()
    prefix = f"{bot_uuid}:"
    return Q(Exact(Substr(field, 1, len(prefix)), prefix))


def _in_bot(bot_uuid: str) -> Q:
    """Rows keyed by scope_key/user_key that belong to one bot ('' = every bot), matched exactly."""
    if not bot_uuid:
        return Q()
    return _scope_key_in_bot(bot_uuid) | Q(user_key=f"bot:{bot_uuid}")


def _quoted(sender_id: str) -> str:
    """How the id appears as a JSON string value in a stored payload (canonical_json)."""
    return json.dumps(sender_id, ensure_ascii=False)


def _other_snapshots(sender_id: str, bot_uuid: str) -> QuerySet[InjectionSnapshot]:
    """Snapshots of someone else that may hold the person's episodes (encrypted ones are read to tell)."""
    candidates = InjectionSnapshot.objects.filter(_in_bot(bot_uuid)).exclude(speaker_id=sender_id)
    return candidates.filter(Q(encrypted=True) | Q(payload_stored__contains=_quoted(sender_id)))


def _audit_to_redact(sender_id: str, targets: set[str], entries: Iterable[AuditEntry]) -> Iterator[AuditEntry]:
    """Those of `entries` about the person, by their structured fields: sent by them, aimed at their
    episodes or profile (`targets`), or an edit whose before- or after-image names them as the
    speaker (an episode reassigned away from them keeps their id and name there). A payload that
    merely contains the id as a string is not about them (erasing the id `active` must not redact
    every `{"status": "active"}` entry)."""
    for entry in entries:
        if entry.sender_id == sender_id or entry.target_id in targets or _edit_names(entry, sender_id):
            yield entry


def _edit_names(entry: AuditEntry, sender_id: str) -> bool:
    if entry.operation not in editing.EDIT_OPERATIONS or entry.redacted:
        return False
    payload = entry.payload
    return any((payload.get(side) or {}).get("sender_id") == sender_id for side in ("before", "after"))


def _audit_entries(bot_uuid: str) -> QuerySet[AuditEntry]:
    return AuditEntry.objects.filter(_in_bot(bot_uuid)) if bot_uuid else AuditEntry.objects.all()


def _by_pk(queryset: QuerySet[Any], pks: list[int]) -> Iterator[Any]:
    """Rows of `queryset` among `pks`, fetched again in batches (re-checked under the lock)."""
    for batch in chunks(pks, BATCH):
        yield from queryset.filter(pk__in=batch).order_by("pk")


@dataclass
class _Found:
    episode_rows: list[tuple[int, str, str]]
    profile_pks: list[int]
    rewrites: list[tuple[InjectionSnapshot, dict[str, Any]]]
    to_redact: list[AuditEntry]
    receipt_id: str = ""  # chosen before the redactions, which name it
    redacted: list[str] = field(default_factory=list)  # the audit ids this erasure redacted (its receipt lists them)
    fact_spaces: set[str] = field(default_factory=set)  # where their facts and window messages are

    @property
    def episode_ids(self) -> set[str]:
        return {row[1] for row in self.episode_rows}

    @property
    def user_keys(self) -> list[str]:
        return sorted({row[2] for row in self.episode_rows})


def erase_subject(
    sender_id: str,
    *,
    bot_uuid: str | None = None,
    actor: Actor,
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ErasureReport:
    """Remove every trace of one person (see the module docstring); `dry_run` only counts.

    Running it again after a run that was killed (or whose vector part failed) finishes that run:
    what its journal lists is purged, and no second receipt is written when nothing new is found
    (`report.resumed`). `progress` receives one line per step of the vector part.

    Raises `ValidationError` for a bad sender id, `PermissionDenied` for an actor limited to other
    bots, `Unavailable` when a stored payload cannot be decrypted. Returns the counts; with `dry_run=False` also the receipt's audit id.

    The search (which reads, and may decrypt, the whole audit log and every snapshot) runs outside
    any transaction: on SQLite a transaction holds the database's write lock from its start, and
    would stop every bot writing for the whole scan. The real run then re-checks what it found,
    and looks at what was written since, inside its transaction.
    """
    sender_id, bot_uuid = _check(sender_id, bot_uuid, actor)
    with unavailable_on_failure():  # a payload no configured key opens
        return _erase(sender_id, bot_uuid, actor, dry_run, progress or erasure_index.quiet)


def unfinished() -> list[dict[str, Any]]:
    """Erasures whose vector-index part is not finished (what the console and the health check
    show: no personal data). Run the same erasure again, or `resume_unfinished`, to finish them."""
    return [journal.describe() for journal in erasure_index.unfinished()]


def resume_unfinished(progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Finish every unfinished erasure's vector-index part (`erase_subject --resume`), then compact
    the database; one result per erasure (`subject_digest`, `ok`, `error`?, `rebuilt`)."""
    results = [
        {"subject_digest": journal.subject_digest, **result}
        for journal, result in erasure_index.resume_unfinished(progress or erasure_index.quiet)
    ]
    if results:
        compact_database()
    return results


def _scrub_import_reports(sender_id: str, bot_uuid: str, episodes: QuerySet[Episode], *, dry_run: bool) -> int:
    """The person's items in import reports (their profile, their episodes by their ids in the file), removed."""
    old_ids = set(episodes.exclude(imported_episode_id="").values_list("imported_episode_id", flat=True))
    naming = erasure_imports.reports_naming(sender_id, bot_uuid, old_ids)
    return erasure_imports.scrub_reports(naming, sender_id, old_ids, dry_run=dry_run)


def _erase(
    sender_id: str, bot_uuid: str, actor: Actor, dry_run: bool, progress: erasure_index.Progress
) -> ErasureReport:
    report = ErasureReport(dry_run=dry_run, subject_digest=audit.subject_digest(sender_id), bot_uuid=bot_uuid)
    episodes = Episode.objects.filter(sender_id=sender_id)
    if bot_uuid:
        episodes = episodes.filter(bot_uuid=bot_uuid)
    profiles = Profile.objects.filter(type=PROFILE_SPEAKER, sender_id=sender_id).filter(_scope_key_in_bot(bot_uuid))
    speaker_snapshots = InjectionSnapshot.objects.filter(_in_bot(bot_uuid), speaker_id=sender_id)

    # High-water marks first: whatever is written during the search lies above them.
    audit_marks = audit.heads()
    snapshot_mark = InjectionSnapshot.objects.aggregate(last=Max("pk"))["last"] or 0
    found = _find(
        sender_id, bot_uuid, episodes, profiles, _other_snapshots(sender_id, bot_uuid), _audit_entries(bot_uuid)
    )
    _fill(report, found, profiles, speaker_snapshots)
    held = erasure_imports.holding(sender_id, bot_uuid)
    erasure_imports.refuse_active(held)
    report.import_files = len(held.kept)
    if dry_run:
        report.facts, report.messages = facts.erase_person(sender_id, bot_uuid, dry_run=True)
        report.import_report_items = _scrub_import_reports(sender_id, bot_uuid, episodes, dry_run=True)
        return report
    pending = erasure_index.unfinished_for(report.subject_digest, bot_uuid)
    index_keys, index_ids = erasure_index.vectors_of(sender_id, bot_uuid)

    with transaction.atomic():
        # Rows first, then the audit chain's head, then snapshots, audit entries and counters: the
        # order in which remember, archive/restore, delete and profile edits take their locks.
        found.episode_rows = list(episodes.values_list("pk", "episode_id", "user_key"))
        found.profile_pks = list(profiles.values_list("pk", flat=True))
        _fill(report, found, profiles, speaker_snapshots)
        hidden = corrections.superseded_by(found.episode_ids)  # locked with the rows, before the chains
        ProfileVersion.objects.filter(profile_id__in=found.profile_pks).delete()
        Profile.objects.filter(pk__in=found.profile_pks).delete()
        report.facts, report.messages = facts.erase_person(sender_id, bot_uuid, dry_run=False)
        report.import_files = erasure_imports.delete_kept(held)
        report.import_report_items = _scrub_import_reports(sender_id, bot_uuid, episodes, dry_run=False)
        pks = [row[0] for row in found.episode_rows]
        for batch in chunks(pks, BATCH):
            Episode.objects.filter(pk__in=batch).delete()
        # Nothing more is appended to the bot's chains until this commits.
        audit.lock_chains_where(_scope_key_in_bot(bot_uuid, "chain"))
        for space, ids in hidden.items():  # what an erased correction hid is no longer corrected
            restore(space, actor, ids, note=CORRECTION_ERASED)

        episode_ids = found.episode_ids
        targets = episode_ids | {f"{PROFILE_SPEAKER}:{sender_id}"}
        others = _other_snapshots(sender_id, bot_uuid)
        found.rewrites = list(
            snapshots_to_rewrite(sender_id, episode_ids, _by_pk(others, [s.pk for s, _ in found.rewrites]))
        )
        found.rewrites += snapshots_to_rewrite(
            sender_id, episode_ids, paging.iter_in_batches(others.filter(pk__gt=snapshot_mark), BATCH)
        )
        entries = _audit_entries(bot_uuid)
        found.to_redact = list(_audit_to_redact(sender_id, targets, _by_pk(entries, [e.pk for e in found.to_redact])))
        found.to_redact += _audit_to_redact(
            sender_id, targets, paging.iter_in_batches(entries.filter(audit.appended_since(audit_marks)), BATCH)
        )
        report.snapshots_deleted = speaker_snapshots.count()
        report.snapshots_redacted = len(found.rewrites)
        report.audit_redacted = len(found.to_redact)

        found.receipt_id = uuid.uuid4().hex  # each redaction names the receipt written below, which lists them
        replacement = redactions.replacement(found.receipt_id, timezone.now())
        for entry in found.to_redact:
            if not redactions.names_receipt(entry):  # one an earlier erasure redacted stays bound to it
                audit.redact(entry, replacement)
                found.redacted.append(entry.audit_id)
            audit.erase_identifiers(
                entry,
                sender_id=entry.sender_id == sender_id,
                # their profile, or a fact about them (`facts.target_id`: subject and key)
                target_id=entry.target_id == f"{PROFILE_SPEAKER}:{sender_id}"
                or (entry.target_type == "fact" and entry.target_id.startswith(facts.target_id(sender_id, ""))),
            )
        for snapshot, payload in found.rewrites:
            snapshot.set_payload(payload)
            blocks = payload.get("system_blocks", [])
            snapshot.episode_count = len(payload.get("episodes", []))
            snapshot.block_count = len(blocks)
            snapshot.injected = bool(blocks)
            snapshot.injection_chars = sum(len(block) for block in blocks)
            fields = ["payload_stored", "encrypted", "episode_count", "block_count", "injected", "injection_chars"]
            snapshot.save(update_fields=fields)
        speaker_snapshots.delete()
        for user_key in found.user_keys:
            recount(user_key)
        if pending is not None and report.total == 0:
            report.resumed = True  # a rerun that only finishes the vector part: the first receipt stands
            journal = erasure_index.open_journal(
                report.subject_digest, bot_uuid, index_keys, index_ids, pending.receipt_audit_id
            )
            report.receipt_audit_id = journal.receipt_audit_id
        else:
            journal = _receipt_and_journal(report, actor, found, index_keys, index_ids, pending is not None)

    progress(
        f"database: done (receipt {report.receipt_audit_id}); vector index: {len(journal.user_keys)} collections to rebuild"
    )
    result = erasure_index.purge(journal, sender_id=sender_id, progress=progress)
    report.collections_rebuilt = result.pop("rebuilt")
    report.vector_index = result
    report.database = compact_database()
    return report


def _receipt_and_journal(
    report: ErasureReport, actor: Actor, found: _Found, index_keys: set[str], index_ids: set[str], resumed: bool
) -> ErasureJournal:
    """The audited receipt (with the id its redactions name, listing them) and the journal of the
    vector part, in the erasure's transaction."""
    bot_uuid = report.bot_uuid
    receipt = audit.append(
        redactions.RECEIPT_OPERATION,
        actor,
        audit_id=found.receipt_id,
        # One bot's erasure is that bot's (user key): an admin limited to it reads the receipt.
        user_key=f"{RESERVED_BOT_UUID}:{bot_uuid}" if bot_uuid else "",
        target_type="subject",
        target_id=audit.ERASED_PREFIX + report.subject_digest,
        summary=said(
            gettext_noop("erased a person: %(episodes)s, %(profiles)s, %(snapshots)s, %(audit)s"),
            episodes=counted(report.episodes, gettext_noop("%(n)s episode"), gettext_noop("%(n)s episodes")),
            profiles=counted(report.profiles, gettext_noop("%(n)s profile"), gettext_noop("%(n)s profiles")),
            snapshots=counted(
                report.snapshots_deleted + report.snapshots_redacted,
                gettext_noop("%(n)s snapshot"),
                gettext_noop("%(n)s snapshots"),
            ),
            audit=counted(
                report.audit_redacted, gettext_noop("%(n)s audit entry"), gettext_noop("%(n)s audit entries")
            ),
        ),
        metadata={
            "subject_digest": report.subject_digest,
            "bot_uuid": bot_uuid or "*",
            "episodes": report.episodes,
            "profiles": report.profiles,
            "profile_versions": report.profile_versions,
            "snapshots_deleted": report.snapshots_deleted,
            "snapshots_redacted": report.snapshots_redacted,
            "audit_redacted": report.audit_redacted,
            "scopes": report.scopes,
            "import_files": report.import_files,
            "import_report_items": report.import_report_items,
            **({"resumed": True} if resumed else {}),
            redactions.LISTED: sorted(found.redacted),
        },
    )
    report.receipt_audit_id = receipt.audit_id
    report.resumed = resumed
    return erasure_index.open_journal(
        report.subject_digest,
        bot_uuid,
        set(found.user_keys) | index_keys,
        found.episode_ids | index_ids,
        receipt.audit_id,
    )


def _find(
    sender_id: str,
    bot_uuid: str,
    episodes: QuerySet[Episode],
    profiles: QuerySet[Profile],
    other_snapshots: QuerySet[InjectionSnapshot],
    entries: QuerySet[AuditEntry],
) -> _Found:
    """Everything about the person, as it stands now (read without a transaction)."""
    episode_rows = list(episodes.values_list("pk", "episode_id", "user_key"))
    episode_ids = {row[1] for row in episode_rows}
    targets = episode_ids | {f"{PROFILE_SPEAKER}:{sender_id}"}
    return _Found(
        episode_rows=episode_rows,
        profile_pks=list(profiles.values_list("pk", flat=True)),
        rewrites=list(snapshots_to_rewrite(sender_id, episode_ids, paging.iter_in_batches(other_snapshots, BATCH))),
        to_redact=list(_audit_to_redact(sender_id, targets, paging.iter_in_batches(entries, BATCH))),
        fact_spaces=facts.spaces_of_person(sender_id, bot_uuid),
    )


def _fill(
    report: ErasureReport,
    found: _Found,
    profiles: QuerySet[Profile],
    speaker_snapshots: QuerySet[InjectionSnapshot],
) -> None:
    report.episodes = len(found.episode_rows)
    report.profiles = len(found.profile_pks)
    report.profile_versions = ProfileVersion.objects.filter(profile_id__in=found.profile_pks).count()
    report.snapshots_deleted = speaker_snapshots.count()
    report.snapshots_redacted = len(found.rewrites)
    report.audit_redacted = len(found.to_redact)
    report.scopes = len({*found.user_keys, *profiles.values_list("scope_key", flat=True), *found.fact_spaces})
