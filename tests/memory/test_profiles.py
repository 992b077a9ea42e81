"""Profiles: update within limits, replace, rollback, every version kept, each change audited."""

from __future__ import annotations

import pytest

from memconsole.memory import profiles
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.models import AuditEntry, Profile, ProfileVersion
from memconsole.memory.scopes import derive_scope

pytestmark = pytest.mark.django_db


def _last_audit() -> AuditEntry:
    entry = AuditEntry.objects.order_by("-id").first()
    assert entry is not None, "no audit entry"
    return entry


def test_it_reads_a_missing_profile_as_empty(keys):
    data, row = profiles.get_profile(keys, "speaker", "u1")
    assert row is None
    assert data == {"name": "", "traits": [], "preferences": [], "notes": ""}


def test_it_creates_a_session_profile_and_audits_it(keys, system):
    row = profiles.update_profile(
        keys, system, "session", name=" Travel club ", notes="Plans trips", add_traits=["friendly"]
    )

    assert (row.scope_key, row.type, row.sender_id, row.version) == (keys.scope_key, "session", "", 1)
    assert row.payload == {"name": "Travel club", "traits": ["friendly"], "preferences": [], "notes": "Plans trips"}
    entry = _last_audit()
    assert (entry.operation, entry.actor, entry.scope_key, entry.user_key) == (
        "profile_update",
        "system:tests",
        keys.scope_key,
        keys.user_key,
    )
    assert (entry.target_type, entry.target_id, entry.sender_id) == ("session_profile", "session", "")
    assert entry.payload["before"] is None
    assert entry.payload["after"] == row.payload
    assert entry.payload["metadata"] == {"version": 1}


def test_it_ignores_a_sender_id_for_a_session_profile(keys, system):
    row = profiles.update_profile(keys, system, "session", "u1", notes="x")
    assert row.sender_id == ""


def test_it_updates_a_speaker_profile_keeping_every_version(keys, system):
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice", add_traits=["curious", "kind"])
    profiles.update_profile(keys, system, "speaker", "u1", add_traits=["KIND", "patient"], add_preferences=["tea"])
    row = profiles.update_profile(keys, system, "speaker", "u1", remove_traits=["Curious"], notes="Met in Paris")

    assert row.version == 3
    assert row.payload == {
        "name": "Alice",
        "traits": ["kind", "patient"],
        "preferences": ["tea"],
        "notes": "Met in Paris",
    }
    versions = list(ProfileVersion.objects.filter(profile=row).order_by("version"))
    assert [v.version for v in versions] == [1, 2, 3]
    assert versions[0].payload["traits"] == ["curious", "kind"]
    assert versions[1].payload["traits"] == ["curious", "kind", "patient"]
    assert versions[2].payload == row.payload
    assert all(v.actor == "system:tests" for v in versions)

    entry = _last_audit()
    assert (entry.target_type, entry.target_id, entry.sender_id) == ("speaker_profile", "speaker:u1", "u1")
    assert entry.payload["sender_name"] == "Alice"
    assert entry.payload["before"]["traits"] == ["curious", "kind", "patient"]
    assert entry.payload["after"]["traits"] == ["kind", "patient"]
    assert entry.payload["metadata"] == {"version": 3}


def test_it_keeps_name_and_notes_unless_given(keys, system):
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice", notes="n")
    row = profiles.update_profile(keys, system, "speaker", "u1", add_preferences=["coffee"])
    assert (row.payload["name"], row.payload["notes"]) == ("Alice", "n")
    row = profiles.update_profile(keys, system, "speaker", "u1", name="", notes="")
    assert (row.payload["name"], row.payload["notes"]) == ("", "")


def test_it_accepts_exactly_20_traits_10_preferences_and_2000_chars_of_notes(keys, system):
    row = profiles.update_profile(
        keys,
        system,
        "speaker",
        "u1",
        add_traits=[f"t{n}" for n in range(20)],
        add_preferences=[f"p{n}" for n in range(10)],
        notes="n" * 2000,
    )
    assert (len(row.payload["traits"]), len(row.payload["preferences"]), len(row.payload["notes"])) == (20, 10, 2000)
    # removing and adding in one update stays within the limit
    row = profiles.update_profile(keys, system, "speaker", "u1", remove_traits=["t0"], add_traits=["t20"])
    assert len(row.payload["traits"]) == 20 and "t20" in row.payload["traits"]


def test_it_replaces_a_whole_profile_after_validation(keys, system):
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice", add_traits=["kind"])
    row = profiles.replace_profile(
        keys,
        system,
        "speaker",
        "u1",
        {"name": "Alicia", "traits": ["bold", "Bold"], "notes": "renamed", "extra": "dropped"},
    )
    assert row.version == 2
    assert row.payload == {"name": "Alicia", "traits": ["bold"], "preferences": [], "notes": "renamed"}
    entry = _last_audit()
    assert entry.operation == "profile_update"
    assert entry.payload["before"]["name"] == "Alice"
    assert entry.payload["after"]["name"] == "Alicia"


def test_it_rolls_back_to_an_earlier_version_as_a_new_version(keys, system):
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice", add_traits=["kind"])
    profiles.update_profile(keys, system, "speaker", "u1", name="Mallory", add_traits=["sneaky"])

    row = profiles.rollback_profile(keys, system, "speaker", "u1", 1)

    assert row.version == 3
    assert row.payload == {"name": "Alice", "traits": ["kind"], "preferences": [], "notes": ""}
    assert ProfileVersion.objects.filter(profile=row).count() == 3
    entry = _last_audit()
    assert (entry.operation, entry.target_id) == ("profile_rollback", "speaker:u1")
    assert entry.payload["before"]["name"] == "Mallory"
    assert entry.payload["after"]["name"] == "Alice"
    assert entry.payload["metadata"] == {"version": 3}
    assert "v1" in entry.payload["summary"]
    assert verify_audit_chain().ok


def test_it_keeps_profiles_apart_per_scope_and_speaker(keys, other_keys, system):
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice in A")
    profiles.update_profile(other_keys, system, "speaker", "u1", name="Alice in B")
    profiles.update_profile(keys, system, "speaker", "u2", name="Bob in A")
    # bot isolation shares episodes across a bot's sessions, never profiles
    profiles.update_profile(derive_scope("bot-a", "group_1", "bot"), system, "session", name="group 1")
    profiles.update_profile(derive_scope("bot-a", "group_2", "bot"), system, "session", name="group 2")

    assert profiles.get_profile(keys, "speaker", "u1")[0]["name"] == "Alice in A"
    assert profiles.get_profile(other_keys, "speaker", "u1")[0]["name"] == "Alice in B"
    assert profiles.get_profile(keys, "speaker", "u2")[0]["name"] == "Bob in A"
    assert profiles.get_profile(derive_scope("bot-a", "group_1", "bot"), "session")[0]["name"] == "group 1"
    assert profiles.get_profile(derive_scope("bot-a", "group_2", "bot"), "session")[0]["name"] == "group 2"
    assert Profile.objects.count() == 5
