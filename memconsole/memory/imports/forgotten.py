"""What this install has forgotten, which an import must not bring back (docs/design.md §7).

Deletes are hard deletes and leave no tombstone row, but each leaves its audit entry: an
episode's `delete` entry names its id in its space, and an erasure's receipt names the person by
their keyed digest (`audit.subject_digest`) and the bot (or every bot). So an import skips, and
reports as conflicts:
- an episode whose id in the file (its own, or the original id it was imported under) was deleted
  in the target space: re-importing an earlier export does not revive what was deleted since;
- every record of a person erased for the target bot (episodes, the speaker profile, facts about
  them, window messages they sent): an erased person does not come back from an old file;
- a keyed fact forgotten in the target space (its `fact_forget` entry names its subject and key)
  whose value in the file is not newer than the forget: the value forgotten, or an older one. A
  fact's subject and key are used again, so what tells the fact a forget removed (as an episode's
  deleted id does) from one set again since (a new memory, as an episode written again is) is the
  time the file gives its value; a value without a time stays forgotten;
- a keyed fact set here after the time the file gives its value: an older export imported again
  does not roll it back (the profile rule is `plan._resolve_profiles`').
A memory that should exist again is written again (remember, or the console's New memory).
"""

from __future__ import annotations

from datetime import datetime

from django.utils.translation import gettext_noop  # translated where the report is shown

from ..audit import ERASED_PREFIX, subject_digest
from ..botmemory_models import Fact
from ..facts import target_id
from ..models import AuditEntry
from ..paging import chunks
from .botmemory_items import FactIn
from .plan import LOOKUP_BATCH, Plan
from .report import ImportReport

DELETED_HERE = gettext_noop("the episode was deleted in this space; not brought back")
FORGOTTEN_HERE = gettext_noop("the fact was forgotten in this space; not brought back")
ERASED_HERE = gettext_noop("this person was erased for this bot; not brought back")
NEWER_HERE = gettext_noop("the fact changed in this space after the file's value; kept as it is")


def drop_forgotten(plan: Plan, report: ImportReport, bot_uuid: str) -> None:
    """Take out of `plan` what the install deleted or erased (each a conflict in `report`)."""
    erased = erased_people(bot_uuid, plan.people())
    file_ids: dict[str, set[str]] = {}  # {user_key: the ids the file gives its episodes there}
    for episode in plan.episodes:
        file_ids.setdefault(episode.keys.user_key, set()).update(i for i in (episode.old_id, episode.file_id) if i)
    deleted = {user_key: deleted_here(user_key, ids) for user_key, ids in file_ids.items()}
    for index, episode in enumerate(plan.episodes):
        if episode.sender_id in erased:
            report.conflict(episode.keys, "erased", episode.where, ERASED_HERE, episode.old_id)
        elif {episode.old_id, episode.file_id} & deleted.get(episode.keys.user_key, set()):
            report.conflict(episode.keys, "deleted_here", episode.where, DELETED_HERE, episode.old_id)
        else:
            continue
        plan.forgotten.add(index)  # skipped by `plan.resolve`, in place (seeded ids stay put)
    for profile in [p for p in plan.profiles if p.sender_id in erased]:
        report.conflict(profile.keys, "erased", profile.where, ERASED_HERE, profile.label)
    plan.profiles[:] = [p for p in plan.profiles if p.sender_id not in erased]
    for fact in [f for f in plan.facts if f.subject in erased]:
        report.conflict(fact.keys, "erased", fact.where, ERASED_HERE)
    plan.facts[:] = [f for f in plan.facts if f.subject not in erased]
    forgotten = {id(fact) for fact in facts_forgotten(plan.facts)}
    for fact in [f for f in plan.facts if id(f) in forgotten]:
        report.conflict(fact.keys, "deleted_here", fact.where, FORGOTTEN_HERE, fact.key)
    plan.facts[:] = [f for f in plan.facts if id(f) not in forgotten]
    newer = {id(fact) for fact in facts_newer_here(plan.facts)}
    for fact in [f for f in plan.facts if id(f) in newer]:
        report.conflict(fact.keys, "newer_here", fact.where, NEWER_HERE, fact.key)
    plan.facts[:] = [f for f in plan.facts if id(f) not in newer]
    for message in [m for m in plan.messages if m.sender_id in erased]:
        report.conflict(message.keys, "erased", message.where, ERASED_HERE)
    plan.messages[:] = [m for m in plan.messages if m.sender_id not in erased]


def deleted_here(user_key: str, ids: set[str]) -> set[str]:
    """The ids among `ids` of episodes the space `user_key` deleted (their `delete` audit entries):
    by the id the episode had here, or by the id it was imported under (a LangBot file imported
    again after one of its memories was deleted), which only the entry's before-image holds."""
    found: set[str] = set()
    entries = AuditEntry.objects.filter(operation="delete", target_type="episode", user_key=user_key)
    for chunk in chunks(sorted(ids), LOOKUP_BATCH):
        found.update(entries.filter(target_id__in=chunk).values_list("target_id", flat=True))
    if ids - found:
        for entry in entries.iterator(chunk_size=LOOKUP_BATCH):  # sealed payloads: read one by one
            before = entry.payload.get("before") or {}
            imported = before.get("imported_episode_id") if isinstance(before, dict) else None
            if imported in ids:
                found.add(imported)
    return found


def facts_forgotten(items: list[FactIn]) -> list[FactIn]:
    """The facts of `items` forgotten in their space (`fact_forget` audit entries) no earlier than
    the file's value was set (the module docstring)."""
    by_space: dict[str, dict[str, list[FactIn]]] = {}  # {user_key: {the audit target: facts}}
    for fact in items:
        by_space.setdefault(fact.keys.user_key, {}).setdefault(target_id(fact.subject, fact.key), []).append(fact)
    forgotten: list[FactIn] = []
    for user_key, by_target in by_space.items():
        entries = AuditEntry.objects.filter(operation="fact_forget", target_type="fact", user_key=user_key)
        last: dict[tuple[str, str], datetime] = {}  # {(subject, key): the latest forget}
        for chunk in chunks(sorted(by_target), LOOKUP_BATCH):
            for entry in entries.filter(target_id__in=chunk).order_by("timestamp"):
                for fact in by_target[entry.target_id]:
                    if len(f"{fact.subject}\x1f{fact.key}") > len(entry.target_id):  # cut at 255: which one?
                        before = entry.payload.get("before") or {}
                        if (before.get("subject"), before.get("key")) != (fact.subject, fact.key):
                            continue
                    last[fact.subject, fact.key] = entry.timestamp
        for facts in by_target.values():
            for fact in facts:
                when = last.get((fact.subject, fact.key))
                if when is not None and (fact.updated_at is None or fact.updated_at <= when):
                    forgotten.append(fact)
    return forgotten


def facts_newer_here(items: list[FactIn]) -> list[FactIn]:
    """The facts of `items` holding another value here, set after the time the file gives theirs."""
    by_space: dict[str, list[FactIn]] = {}
    for fact in items:
        if fact.updated_at is not None:
            by_space.setdefault(fact.keys.user_key, []).append(fact)
    newer: list[FactIn] = []
    for user_key, facts in by_space.items():
        stored: dict[tuple[str, str], Fact] = {}
        for chunk in chunks(sorted({fact.subject for fact in facts}), LOOKUP_BATCH):
            stored.update(
                {(row.subject, row.key): row for row in Fact.objects.filter(user_key=user_key, subject__in=chunk)}
            )
        for fact in facts:
            row = stored.get((fact.subject, fact.key))
            if (
                row is not None
                and fact.updated_at is not None
                and row.updated_at > fact.updated_at
                and row.text != fact.value
            ):
                newer.append(fact)
    return newer


def erased_people(bot_uuid: str, sender_ids: set[str]) -> set[str]:
    """The sender ids among `sender_ids` that an erasure for `bot_uuid` (or for every bot) removed."""
    by_digest = {ERASED_PREFIX + subject_digest(sender_id): sender_id for sender_id in sender_ids}
    erased: set[str] = set()
    receipts = AuditEntry.objects.filter(operation="erase_subject")
    for chunk in chunks(sorted(by_digest), LOOKUP_BATCH):
        for receipt in receipts.filter(target_id__in=chunk):
            if receipt.payload.get("metadata", {}).get("bot_uuid") in ("*", bot_uuid):
                erased.add(by_digest[receipt.target_id])
    return erased
