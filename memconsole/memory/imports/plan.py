"""What a file holds, read and checked before anything is written: the plan of an import.

Parsers fill a `Plan` with `EpisodeIn`/`ProfileIn` records whose keys come from the `Target`
(re-derived for the target bot, session and isolation, whatever the file says). `resolve` then
decides against the database: an episode whose old id is already in the target scope (imported
before, or the scope's own episode) or appears earlier in the file is a conflict and skipped; the
rest get new ids and `superseded_by` is mapped to them; a profile that already exists is reported
as a conflict (it gets the imported one as a new version), and one the same as the stored one too
(`exists`: it is left as it is, as a live change that changes nothing: no version, no audit entry).

A plan with an `id_seed` (a background job's import, which writes in batches and may be resumed)
makes its new ids from the seed and each episode's place in the file, so a resumed attempt, reading
the same file, gives every episode the id the first attempt gave it: an old id already in the scope
*under that id* is this import's own earlier batch, kept (the writer skips what is written), not a
conflict. Without a seed the ids are random.

An episode the source had deleted (LangBot's `deleted`) never enters the plan's episodes: it is
kept aside and reported as skipped (`skipped_deleted`), in a dry run and a real run alike. The
notes (warnings) of the records that will be written go into the report.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_noop  # reasons: English here, translated where shown

from .. import profiles
from ..errors import ValidationError
from ..models import Episode, new_episode_id
from ..paging import chunks
from ..scopes import ScopeKeys, derive_scope
from ..validation import MAX_SENDER_CHARS
from ..wording import said
from . import fields
from .botmemory_items import FactIn, MessageIn
from .fields import DELETED, Note
from .report import ImportFileError, ImportReport

MAX_RECORDS = 2_000_000
LOOKUP_BATCH = 500

# progress(stage, done, total): stage is "reading", "writing" or "indexing".
Progress = Callable[[str, int, int], None]
# target(the file's session name, where in the file) -> the target scope's keys (checked for the actor).
Target = Callable[[Any, str], ScopeKeys]


def speaker(value: str, where: str, name: str) -> str:
    """A record's speaker id or name as a live write keeps it (`validation.validate_speaker`): an
    erased person's id padded with a BOM is still theirs, a line break in it refuses the file."""
    return fields.identifier(value, where, name, MAX_SENDER_CHARS)


@dataclass(slots=True)
class EpisodeIn:
    keys: ScopeKeys
    where: str
    old_id: str
    content: str
    tags: list[str]
    importance: int
    timestamp: datetime | None
    sender_id: str
    sender_name: str
    status: str
    superseded_by: str
    new_id: str = ""
    # The id `superseded_by` refers to in the file, when it is not `old_id` (a memconsole export of
    # an earlier import: `old_id` is the original `imported_episode_id`, this the exported `id`).
    file_id: str = ""
    original_source: str = ""
    notes: list[Note] = field(default_factory=list)
    kind: str = ""  # issue 20: the episode's kind and its (sealed) metadata
    metadata: dict[str, Any] = field(default_factory=dict)
    query_id: str = ""  # the message it was remembered from (an export carries it)

    def __post_init__(self) -> None:
        # The speaker as every write keeps them, whatever the format: one person for erasure.
        self.sender_id = speaker(self.sender_id, self.where, "sender_id")
        self.sender_name = speaker(self.sender_name, self.where, "sender_name")

    @property
    def ref(self) -> str:
        """The id other records of the file use for this one."""
        return self.file_id or self.old_id


@dataclass(slots=True)
class ProfileIn:
    keys: ScopeKeys
    where: str
    type: str
    sender_id: str
    data: dict[str, Any]
    updated_at: datetime | None
    notes: list[Note] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sender_id = speaker(self.sender_id, self.where, "sender_id")

    @property
    def label(self) -> str:
        return f"{self.type}:{self.sender_id}" if self.sender_id else self.type


@dataclass
class Plan:
    episodes: list[EpisodeIn] = field(default_factory=list)
    profiles: list[ProfileIn] = field(default_factory=list)
    scopes: dict[tuple[str, str], ScopeKeys] = field(default_factory=dict)
    deleted: list[EpisodeIn] = field(default_factory=list)  # deleted in the source: never written
    facts: list[FactIn] = field(default_factory=list)  # issue 20: keyed facts and window messages
    messages: list[MessageIn] = field(default_factory=list)
    # The import's one "now": rows' created_at, and the time of an episode whose timestamp is empty.
    imported_at: datetime = field(default_factory=timezone.now)
    id_seed: str = ""  # see the module docstring
    # Places in `episodes` of those deleted or erased here (imports/forgotten.py): skipped, their
    # places kept so that every other episode's seeded id is the same on each attempt.
    forgotten: set[int] = field(default_factory=set)

    def new_id(self, index: int) -> str:
        """The new id of the episode at `index` in `episodes`: random, or derived from `id_seed`."""
        if not self.id_seed:
            return new_episode_id()
        return hashlib.sha256(f"{self.id_seed}:{index}".encode()).hexdigest()[:12]

    def people(self) -> set[str]:
        """The sender ids the file's records name: episodes (the source's deleted ones too), speaker
        profiles, facts' subjects, window messages."""
        named = {e.sender_id for e in self.episodes + self.deleted} | {p.sender_id for p in self.profiles}
        return (named | {f.subject for f in self.facts} | {m.sender_id for m in self.messages}) - {""}

    def keys_for(self, bot_uuid: str, session_name: Any, isolation: str, where: str) -> ScopeKeys:
        """The keys of a target scope (recorded in the plan); `ImportFileError` for a bad session."""
        if not isinstance(session_name, str) or not session_name.strip():
            raise ImportFileError(
                said(gettext_noop("%(where)s: no session name (pass a target session name)"), where=where),
                field="session_name",
            )
        try:
            keys = derive_scope(bot_uuid, session_name.strip(), isolation)
        except ValidationError as exc:
            raise ImportFileError(
                said(gettext_noop("%(where)s: %(reason)s"), where=where, reason=exc.said or exc.message),
                field=exc.field,
            ) from None
        self.scopes.setdefault((keys.scope_key, keys.isolation), keys)
        return keys

    def add_episode(self, episode: EpisodeIn) -> None:
        if len(self.episodes) + len(self.deleted) >= MAX_RECORDS:
            raise ImportFileError(
                said(
                    gettext_noop("%(where)s: more than %(max)s records in one file; split it"),
                    where=episode.where,
                    max=MAX_RECORDS,
                )
            )
        if episode.status == DELETED:
            self.deleted.append(episode)
        else:
            self.episodes.append(episode)


def resolve(plan: Plan, report: ImportReport) -> list[EpisodeIn]:
    """Drop conflicting episodes, give the rest new ids, map superseded_by; fill the report.

    Returns the episodes to write.
    """
    by_user_key: dict[str, list[tuple[str, EpisodeIn]]] = {}
    for index, episode in enumerate(plan.episodes):
        if index in plan.forgotten:
            continue
        by_user_key.setdefault(episode.keys.user_key, []).append((plan.new_id(index), episode))
    kept: list[EpisodeIn] = []
    for user_key, episodes in by_user_key.items():
        kept.extend(_new_episodes(user_key, episodes, report))
    for episode in kept:
        scope = report.scope(episode.keys)
        scope["episodes"] += 1
        scope["statuses"][episode.status] = scope["statuses"].get(episode.status, 0) + 1
        report.statuses[episode.status] = report.statuses.get(episode.status, 0) + 1
        for kind, message in episode.notes:
            report.warn(episode.keys, kind, episode.where, message, episode.old_id)
    report.episodes = len(kept)
    for episode in plan.deleted:
        report.skip_deleted(episode.keys, episode.where, episode.old_id)
    _resolve_profiles(plan.profiles, report)
    return kept


def _resolve_profiles(items: list[ProfileIn], report: ImportReport) -> None:
    """Count the profiles the import writes: an existing one becomes a new version (a conflict,
    said so); one the same as stored is left as it is (a conflict too, not written: no version)."""
    stored: dict[tuple[str, str, str], dict[str, Any] | None] = {}  # what each holds as the file is written
    changed: dict[tuple[str, str, str], datetime] = {}  # when each stored one last changed here
    kept = []
    for profile in items:
        owner = (profile.keys.scope_key, profile.type, profile.sender_id)
        if owner not in stored:
            data, row = profiles.get_profile(profile.keys, profile.type, profile.sender_id)
            stored[owner] = data if row is not None else None
            if row is not None:
                changed[owner] = row.updated_at
        current = stored[owner]
        if current is not None and profiles.unchanged(current, profile.data):
            reason = gettext_noop("already in the target scope; skipped")
            report.conflict(profile.keys, "exists", profile.where, reason, profile.label)
            continue
        if owner in changed and profile.updated_at is not None and changed[owner] > profile.updated_at:
            reason = gettext_noop("the profile changed in this space after the file's; kept as it is")
            report.conflict(profile.keys, "newer_here", profile.where, reason, profile.label)
            continue  # an older export imported again does not roll it back
        kept.append(profile)
        stored[owner] = profile.data
        report.scope(profile.keys)["profiles"] += 1
        report.profiles += 1
        for kind, message in profile.notes:
            report.warn(profile.keys, kind, profile.where, message, profile.label)
        if current is not None:
            report.conflict(
                profile.keys,
                "profile_exists",
                profile.where,
                gettext_noop("a profile already exists; the imported one becomes its newest version"),
                profile.label,
            )
    items[:] = kept


def _existing_ids(user_key: str, old_ids: list[str]) -> dict[str, str]:
    """{old id: the episode id in the scope} for the old ids the scope already holds."""
    existing: dict[str, str] = {}
    in_scope = Episode.objects.in_scope(user_key)
    for chunk in chunks(old_ids, LOOKUP_BATCH):
        for episode_id, imported in in_scope.filter(imported_episode_id__in=chunk).values_list(
            "episode_id", "imported_episode_id"
        ):
            existing.setdefault(imported, episode_id)
        for episode_id in in_scope.with_ids(chunk).values_list("episode_id", flat=True):
            existing.setdefault(episode_id, episode_id)
    return existing


def _new_episodes(user_key: str, candidates: list[tuple[str, EpisodeIn]], report: ImportReport) -> list[EpisodeIn]:
    """`candidates`: (the id the episode gets if kept, the episode), in file order."""
    existing = _existing_ids(user_key, sorted({e.old_id for _, e in candidates if e.old_id}))
    # {the id the file uses: the episode id it has in the scope}, to map superseded_by.
    new_ids: dict[str, str] = dict(existing)
    taken: set[str] = set()
    kept: list[EpisodeIn] = []
    episodes = [episode for _, episode in candidates]
    for new_id, episode in candidates:
        ours = bool(episode.old_id) and existing.get(episode.old_id) == new_id  # written by an earlier attempt
        if episode.old_id and episode.old_id in taken:
            report.conflict(
                episode.keys,
                "duplicate",
                episode.where,
                gettext_noop("the same id appears earlier in the file; skipped"),
                episode.old_id,
            )
            continue
        if episode.old_id and episode.old_id in existing and not ours:
            report.conflict(
                episode.keys,
                "exists",
                episode.where,
                gettext_noop("already in the target scope; skipped"),
                episode.old_id,
            )
            new_ids.setdefault(episode.ref, existing[episode.old_id])
            continue
        episode.new_id = new_id
        if episode.old_id:
            taken.add(episode.old_id)
        if episode.ref:
            new_ids[episode.ref] = episode.new_id
        kept.append(episode)
    for episode in episodes:
        if episode.new_id and episode.superseded_by:
            replaced_by = new_ids.get(episode.superseded_by, "")
            if not replaced_by:
                message = said(
                    gettext_noop("superseded_by %(id)s is not an episode imported or in the space; left empty"),
                    id=f"{episode.superseded_by!r:.80}",
                )
                report.warn(episode.keys, "superseded_by_missing", episode.where, message, episode.old_id)
            episode.superseded_by = replaced_by
    _drop_impossible_links(user_key, kept, report)
    return kept


LINK_PROBLEMS = {
    "superseded_by_self": gettext_noop("superseded_by names the episode itself; left empty"),
    "superseded_by_other_speaker": gettext_noop(
        "superseded_by names another speaker's episode (a correction replaces only its own speaker's); left empty"
    ),
    "superseded_by_cycle": gettext_noop("superseded_by goes round in a circle back to this episode; left empty"),
}


def _drop_impossible_links(user_key: str, kept: list[EpisodeIn], report: ImportReport) -> None:
    """Empty (with a warning) the supersede links a live write never makes (docs/design.md §4): to
    the episode itself, to another speaker's episode, or round a circle (then nothing is active)."""
    linked = [episode for episode in kept if episode.superseded_by]
    if not linked:
        return
    sender = {episode.new_id: episode.sender_id for episode in kept}
    outside = sorted({e.superseded_by for e in linked} - set(sender))
    for chunk in chunks(outside, LOOKUP_BATCH):
        sender.update(Episode.objects.in_scope(user_key).with_ids(chunk).values_list("episode_id", "sender_id"))
    link = {episode.new_id: episode.superseded_by for episode in linked}
    problems = {}
    for episode in linked:
        if episode.superseded_by == episode.new_id:
            problems[episode.new_id] = "superseded_by_self"
        elif sender.get(episode.superseded_by, episode.sender_id) != episode.sender_id:
            problems[episode.new_id] = "superseded_by_other_speaker"
        elif _in_circle(episode.new_id, link):
            problems[episode.new_id] = "superseded_by_cycle"
    for episode in linked:
        if kind := problems.get(episode.new_id):
            report.warn(episode.keys, kind, episode.where, said(LINK_PROBLEMS[kind]), episode.old_id)
            episode.superseded_by = ""


def _in_circle(start: str, link: dict[str, str]) -> bool:
    seen, current = {start}, link.get(start, "")
    while current and current not in seen:
        seen.add(current)
        current = link.get(current, "")
    return current == start
