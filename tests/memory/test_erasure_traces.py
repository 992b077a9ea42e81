"""What an erasure must not leave behind in other people's records (found by probing as a privacy
auditor would): the person's window messages and their id in others' injection snapshots, their id
in the audit target of a fact about them, and a padded id that erased nothing."""

from __future__ import annotations

import pytest

from memconsole.memory import editing, episodes, facts, injection, window
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.erasure import erase_subject
from memconsole.memory.models import AuditEntry, Episode, InjectionSnapshot

pytestmark = pytest.mark.django_db


def test_it_takes_the_persons_messages_and_id_out_of_other_peoples_snapshots(keys, system):
    window.append_message(keys, system, "user", "Victoria here, my passport is ZX998877", sender_id="victim7")
    episodes.remember(keys, system, "I collect vintage gramophones", sender_id="victim7", sender_name="Victoria")
    episodes.remember(keys, system, "Bob plays chess on Sundays", sender_id="bob", sender_name="Bob")
    asked = injection.record_injection(
        keys, system, "What does Victoria collect?", sender_id="bob", include_window=True
    ).snapshot
    assert asked.payload["history"] and "victim7" in asked.payload["retrieval"]["named_speakers"]

    erase_subject("victim7", bot_uuid=keys.bot_uuid, actor=system)

    payload = InjectionSnapshot.objects.get(pk=asked.pk).payload
    assert "ZX998877" not in str(payload) and "victim7" not in str(payload) and "gramophones" not in str(payload)
    assert payload["history"] == [] and payload["retrieval"]["named_speakers"] == []
    assert verify_audit_chain().ok


def test_it_leaves_no_raw_id_in_the_audit_target_of_a_fact_about_the_person(keys, system):
    facts.remember_fact(keys, system, "victim7", "phone", "555-0199")
    facts.remember_fact(keys, system, "bob", "phone", "555-0100")

    erase_subject("victim7", bot_uuid=keys.bot_uuid, actor=system)

    targets = list(AuditEntry.objects.filter(target_type="fact").values_list("target_id", flat=True))
    assert not any("victim7" in target for target in targets)
    assert facts.target_id("bob", "phone") in targets  # someone else's fact is not theirs
    assert verify_audit_chain().ok


def test_a_padded_id_erases_the_person_it_names(keys, system):
    episodes.remember(keys, system, "I work as a pilot", sender_id="victim9")
    report = erase_subject(" victim9 ", bot_uuid=keys.bot_uuid, actor=system)
    assert report.episodes == 1 and not Episode.objects.exists()


def test_it_redacts_the_edit_that_moved_an_episode_away_from_the_person(keys, system):
    """Found by an auditor: an episode reassigned from the person to Bob kept their id and name in
    the reassignment's before-image after they were erased."""
    moved = episodes.remember(
        keys, system, "Met the plumber", sender_id="victim7", sender_name="Zyxwell Quorra"
    ).episode
    editing.reassign_speaker(keys, system, moved.episode_id, "bob", "Bob")

    erase_subject("victim7", bot_uuid=keys.bot_uuid, actor=system)

    reassigned = AuditEntry.objects.get(operation="episode_reassign")
    assert reassigned.redacted
    assert "victim7" not in str(reassigned.payload) and "Zyxwell" not in str(reassigned.payload)
    assert Episode.objects.get(pk=moved.pk).sender_id == "bob"  # the memory, now Bob's, stays
    assert verify_audit_chain().ok
