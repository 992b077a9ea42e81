"""Erasure erases exactly its subject (issue 15): within one bot it matches that bot's keys exactly
(SQLite's LIKE ignores case, so `rt-case-bot` once reached `RT-CASE-BOT`), and it redacts only the
audit entries about the person (sender, target, their episodes and profiles), never entries whose
payload merely contains their id as a string."""

from __future__ import annotations

import pytest

from memconsole.memory import episodes, erasure, injection, profiles
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.models import AuditEntry, InjectionSnapshot, Profile
from memconsole.memory.scopes import derive_scope

pytestmark = pytest.mark.django_db


def _person_in(bot_uuid: str, system, isolation: str = "session") -> None:
    keys = derive_scope(bot_uuid, "group_1", isolation)
    episodes.remember(keys, system, f"u1 keeps bees for {bot_uuid}", sender_id="u1", sender_name="Ann")
    profiles.update_profile(keys, system, "speaker", "u1", name="Ann", add_traits=["keeps bees"])
    injection.record_injection(keys, system, "bees", sender_id="u1", sender_name="Ann", top_k=3)


@pytest.mark.parametrize("isolation", ["session", "bot"])
def test_it_erases_within_the_bot_named_exactly_not_one_differing_in_case(system, isolation):
    _person_in("rt-case-bot", system, isolation)
    _person_in("RT-CASE-BOT", system, isolation)
    upper = derive_scope("RT-CASE-BOT", "group_1", isolation)
    upper_entries = set(AuditEntry.objects.filter(scope_key=upper.scope_key).values_list("pk", flat=True))

    report = erasure.erase_subject("u1", bot_uuid="rt-case-bot", actor=system)

    assert (report.episodes, report.profiles, report.snapshots_deleted) == (1, 1, 1)
    assert Profile.objects.filter(sender_id="u1", scope_key=upper.scope_key).exists()
    assert not Profile.objects.filter(sender_id="u1", scope_key="rt-case-bot:group_1").exists()
    assert InjectionSnapshot.objects.filter(speaker_id="u1", scope_key=upper.scope_key).count() == 1
    assert not AuditEntry.objects.filter(pk__in=upper_entries, redacted=True).exists()
    assert AuditEntry.objects.filter(pk__in=upper_entries, sender_id="u1").count() == len(upper_entries)
    assert verify_audit_chain().ok


def test_it_redacts_only_entries_about_the_person_not_payloads_naming_the_id(system):
    keys = derive_scope("bot-a", "group_1", "session")
    others = [
        episodes.remember(keys, system, f"Bob note {n}", sender_id="bob", sender_name="Bob").episode.episode_id
        for n in range(3)
    ]
    episodes.archive(keys, system, others)
    episodes.restore(keys, system, others)  # payloads {"status": "active"}: they merely contain "active"
    profiles.update_profile(keys, system, "session", name="Club", add_traits=["active"])
    mine = episodes.remember(keys, system, "I am the one named active", sender_id="active").episode.episode_id
    episodes.archive(keys, system, [mine])
    profiles.update_profile(keys, system, "speaker", "active", name="Act")
    unrelated = set(AuditEntry.objects.exclude(sender_id="active").values_list("pk", flat=True))
    assert len(unrelated) == 3 + 3 + 3 + 1

    report = erasure.erase_subject("active", actor=system)

    assert not AuditEntry.objects.filter(pk__in=unrelated, redacted=True).exists()
    erased = AuditEntry.objects.filter(redacted=True)
    assert report.audit_redacted == erased.count() == 3  # remember, archive and the profile edit
    assert {entry.target_id for entry in erased} >= {mine}
    assert verify_audit_chain().ok
