"""Memory semantics a team can trust (issue 14): speaker-aware corrections, forgiving writes, filters
that mean what they say, and profiles that keep working for a long-running bot."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from memconsole.memory import editing, episodes, exports, models, profiles, ranking, retrieval, validation
from memconsole.memory.errors import Conflict, ValidationError
from memconsole.memory.models import AuditEntry, Episode, ProfileVersion

pytestmark = pytest.mark.django_db

ALICE = "I live in Lisbon and work as a nurse"
CORRECTION = "Correction: I live in Lisbon and work as a nurse now"  # ≈ 0.864 to ALICE, above 0.85


def _last_audit() -> AuditEntry:
    entry = AuditEntry.objects.order_by("-id").first()
    assert entry is not None
    return entry


def _status(episode: Episode) -> tuple[str, str, int]:
    episode.refresh_from_db()
    return episode.status, episode.superseded_by, episode.importance


# --- corrections only replace the same person's memory ----------------------------------------------


def test_it_never_lets_one_speaker_supersede_another_speakers_memory(keys, system):
    alice = episodes.remember(keys, system, ALICE, sender_id="alice", sender_name="Alice").episode

    result = episodes.remember(keys, system, CORRECTION, tags=["correction"], sender_id="mallory")

    assert result.superseded == []
    assert _status(alice) == ("active", "", 2)
    hits = retrieval.recall(keys, "Where does Alice live?", sender_id="alice")
    assert [hit.episode.episode_id for hit in hits] == [alice.episode_id]


def test_it_still_supersedes_a_self_correction(keys, system):
    alice = episodes.remember(keys, system, ALICE, sender_id="alice").episode
    mallory = episodes.remember(keys, system, ALICE, sender_id="mallory").episode

    result = episodes.remember(keys, system, CORRECTION, tags=["correction"], sender_id="alice")

    assert result.superseded == [alice.episode_id]
    assert _status(alice)[:2] == ("superseded", result.episode.episode_id)
    assert _status(mallory) == ("active", "", 2)


def test_deleting_a_correction_brings_back_what_it_corrected(keys, system):
    """Found by probing the API: forgetting a correction left the memory it had replaced hidden
    for good, and the bot knew nothing about Alice any more."""
    alice = episodes.remember(keys, system, ALICE, sender_id="alice").episode
    correction = episodes.remember(keys, system, CORRECTION, tags=["correction"], sender_id="alice").episode
    assert _status(alice)[0] == "superseded"

    episodes.delete(keys, system, [correction.episode_id])

    assert _status(alice)[:2] == ("active", "")
    entry = _last_audit()
    assert (entry.operation, entry.target_id) == ("restore", alice.episode_id)
    assert entry.payload["metadata"]["correction"] == correction.episode_id
    hits = retrieval.recall(keys, "Where does Alice live?", sender_id="alice")
    assert [hit.episode.episode_id for hit in hits] == [alice.episode_id]


def test_a_memory_brought_back_gets_back_the_importance_its_correction_lowered(keys, system):
    """Found by a user: one mistaken correction, deleted, left a critical memory at importance 1."""
    alice = episodes.remember(keys, system, ALICE, sender_id="alice", importance=5).episode
    correction = episodes.remember(keys, system, CORRECTION, tags=["correction"], sender_id="alice").episode
    assert _status(alice) == ("superseded", correction.episode_id, 1)

    episodes.delete(keys, system, [correction.episode_id])

    assert _status(alice) == ("active", "", 5)
    assert _last_audit().payload["after"] == {"status": "active", "importance": 5}


def test_an_importance_changed_since_the_correction_is_kept_when_restored(keys, system):
    alice = episodes.remember(keys, system, ALICE, sender_id="alice", importance=5).episode
    episodes.remember(keys, system, CORRECTION, tags=["correction"], sender_id="alice")
    editing.edit_episode(keys, system, alice.episode_id, importance=3)  # an edit made since

    episodes.restore(keys, system, [alice.episode_id])

    assert _status(alice) == ("active", "", 3)


def test_deleting_a_correction_with_what_it_corrected_restores_nothing(keys, system):
    alice = episodes.remember(keys, system, ALICE, sender_id="alice").episode
    correction = episodes.remember(keys, system, CORRECTION, tags=["correction"], sender_id="alice").episode

    assert episodes.delete(keys, system, [alice.episode_id, correction.episode_id]) == 2

    assert not Episode.objects.exists() and not AuditEntry.objects.filter(operation="restore").exists()


def test_it_supersedes_an_episode_without_a_sender_only_from_one_without_a_sender(keys, system):
    nobody = episodes.remember(keys, system, ALICE).episode
    assert episodes.remember(keys, system, CORRECTION, tags=["correction"], sender_id="alice").superseded == []
    assert _status(nobody) == ("active", "", 2)

    alice = episodes.remember(keys, system, ALICE, sender_id="alice").episode
    result = episodes.remember(keys, system, CORRECTION, tags=["fact-update"])

    assert result.superseded == [nobody.episode_id]
    assert _status(alice)[0] == "active"


@pytest.mark.parametrize(("old", "new"), [(5, 1), (4, 1), (2, 1), (1, 1)])
def test_it_drops_a_superseded_importance_to_a_tenth_at_least_one(keys, system, old, new):
    before = episodes.remember(keys, system, ALICE, importance=old, sender_id="alice").episode
    episodes.remember(keys, system, CORRECTION, tags=["correction"], sender_id="alice")
    assert _status(before)[0::2] == ("superseded", new)
    assert ranking.superseded_importance(old) == max(1, int(old * 0.1)) == new


@pytest.mark.parametrize("tag", ["Correction", "FACT-UPDATE", "Clarification"])
def test_it_supersedes_on_a_correction_tag_in_any_letter_case(keys, system, tag):
    old = episodes.remember(keys, system, ALICE, sender_id="alice").episode
    assert episodes.remember(keys, system, CORRECTION, tags=[tag], sender_id="alice").superseded == [old.episode_id]


@pytest.mark.parametrize(
    "tag",
    [
        "correction",
        "Clarification",
        "PROFILE-UPDATE",
        "Preference-Change",
        "fact-update",
        "更正",
        "修正",
        "纠正",
        "偏好变化",
    ],
)
def test_it_weights_every_update_tag_in_any_letter_case(tag):
    now = datetime(2025, 6, 1, tzinfo=UTC)
    parts = ranking.breakdown(
        similarity=0.5,
        timestamp=now,
        importance=2,
        episode_sender_id="",
        current_speaker_id=None,
        tags=["travel", tag],
        exact=0.0,
        now=now,
        half_life_days=30,
    )
    assert parts.update == 1.08
    assert ranking.supersedes([tag]) == (tag.casefold() in {"correction", "fact-update", "clarification"})


# --- writes never lose a memory over a detail ---------------------------------------------------------


@pytest.mark.parametrize(("given", "stored"), [(7, 5), (6, 5), (10**30, 5), (0, 1), (-3, 1)])
def test_it_clamps_an_importance_outside_1_to_5_and_says_so(keys, system, given, stored):
    result = episodes.remember(keys, system, "An LLM chose an odd importance", importance=given)

    assert result.adjusted == ["importance"]
    assert Episode.objects.get(pk=result.episode.pk).importance == stored
    entry = _last_audit()
    assert entry.payload["after"]["importance"] == stored
    assert entry.payload["metadata"]["adjusted"] == ["importance"]


def test_it_adjusts_nothing_for_an_importance_within_1_to_5(keys, system):
    result = episodes.remember(keys, system, "A plain memory", importance=5)
    assert (result.adjusted, result.episode.importance) == ([], 5)
    assert "adjusted" not in _last_audit().payload["metadata"]


@pytest.mark.parametrize("importance", [2.5, "3", True, None])
def test_it_still_refuses_an_importance_that_is_not_a_whole_number(keys, system, importance):
    with pytest.raises(ValidationError) as caught:
        episodes.remember(keys, system, "x", importance=importance)
    assert caught.value.field == "importance"
    assert not Episode.objects.exists()


def test_it_exposes_the_clamp_for_imports():
    assert validation.clamp_importance(7) == (5, True)
    assert validation.clamp_importance(0) == (1, True)
    assert validation.clamp_importance(3) == (3, False)
    with pytest.raises(ValidationError):
        validation.clamp_importance(2.5)


def test_it_keeps_the_query_id_on_the_episode_and_its_audit_entry(keys, system):
    episode = episodes.remember(keys, system, "Alice moved to Porto", query_id="msg-8812").episode

    assert Episode.objects.get(pk=episode.pk).query_id == "msg-8812"
    entry = _last_audit()
    assert (entry.target_id, entry.query_id) == (episode.episode_id, "msg-8812")
    assert entry.payload["after"]["query_id"] == "msg-8812"
    with pytest.raises(ValidationError) as caught:
        episodes.remember(keys, system, "x", query_id="q" * 256)
    assert caught.value.field == "query_id"


def test_it_exports_the_query_id_where_there_is_one(keys, system):
    traced = episodes.remember(keys, system, "Alice moved to Porto", query_id="msg-8812").episode
    episodes.remember(keys, system, "Bob likes tea")

    doc = json.loads("".join(exports.stream_scope_export(keys, system)))

    records = {record["id"]: record for record in doc["episodes"]["episodes"]}
    assert records.pop(traced.episode_id)["query_id"] == "msg-8812"
    assert ["query_id" in record for record in records.values()] == [False]


def test_it_trims_content_and_still_refuses_all_whitespace(keys, system):
    episode = episodes.remember(keys, system, "  \n Alice likes green tea \t\n").episode
    assert Episode.objects.get(pk=episode.pk).content == "Alice likes green tea"
    assert _last_audit().payload["summary"] == "remembered: Alice likes green tea"
    with pytest.raises(ValidationError) as caught:
        episodes.remember(keys, system, " \n\t ")
    assert caught.value.field == "content"


# --- filters mean what they say -------------------------------------------------------------------------

NOON = datetime(2026, 1, 7, 12, 0, tzinfo=UTC)


def test_it_includes_an_episode_at_exactly_time_before(keys, system):
    at_noon = episodes.remember(keys, system, "The ferry leaves at noon", timestamp=NOON).episode
    later = episodes.remember(keys, system, "The ferry left late", timestamp=NOON + timedelta(seconds=1)).episode

    listed = [e.episode_id for e in episodes.list_episodes(keys, time_before=NOON).episodes]
    found = [h.episode.episode_id for h in retrieval.recall(keys, "ferry", time_before=NOON, top_k=10)]

    assert listed == [at_noon.episode_id] == found
    assert later.episode_id not in found
    assert [e.episode_id for e in episodes.list_episodes(keys, time_after=NOON, time_before=NOON).episodes] == [
        at_noon.episode_id
    ]


def test_it_reads_a_time_without_a_zone_as_utc(keys, system):
    naive = datetime(2026, 1, 7, 12, 0)  # noqa: DTZ001  # naive on purpose
    assert validation.validate_datetime(naive, "time_before") == NOON
    episode = episodes.remember(keys, system, "The ferry leaves at noon", timestamp=naive).episode

    assert Episode.objects.get(pk=episode.pk).timestamp == NOON
    assert [e.episode_id for e in episodes.list_episodes(keys, time_before=naive).episodes] == [episode.episode_id]
    assert [h.episode.episode_id for h in retrieval.recall(keys, "ferry", time_after=naive)] == [episode.episode_id]


def test_it_returns_the_episode_a_query_names_by_id_first_whatever_its_age(keys, system, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(models, "new_episode_id", lambda: "5a1e0c3f9b2d")
        old = episodes.remember(
            keys, system, "We adopted a puppy", importance=1, timestamp=datetime.now(UTC) - timedelta(days=700)
        ).episode
    fresh = [episodes.remember(keys, system, f"Fresh note number {n} about 5a1e") for n in range(3)]

    hits = retrieval.recall(keys, " 5A1E0C3F9B2D ", top_k=2)

    assert hits[0].episode.episode_id == old.episode_id
    assert hits[0].score < hits[1].score  # first although its score is lower: an exact hit
    assert len(hits) == 2 and fresh


def test_it_reads_an_empty_statuses_list_as_active(keys, system):
    active = episodes.remember(keys, system, "Tea with Alice on Sunday").episode
    archived = episodes.remember(keys, system, "Tea with Bob on Monday").episode
    episodes.archive(keys, system, [archived.episode_id])

    assert [h.episode.episode_id for h in retrieval.recall(keys, "tea", statuses=[], top_k=5)] == [active.episode_id]
    assert [e.episode_id for e in episodes.list_episodes(keys, statuses=[]).episodes] == [active.episode_id]
    assert validation.validate_statuses([]) == ["active"]
    with pytest.raises(ValidationError) as caught:
        retrieval.recall(keys, "tea", statuses=["deleted"])
    assert caught.value.field == "statuses"


# --- profiles that keep working for a long-running bot -------------------------------------------------


def _full_profile(keys, system):
    profiles.update_profile(
        keys,
        system,
        "speaker",
        "u1",
        add_traits=[f"trait {n}" for n in range(20)],
        add_preferences=[f"preference {n}" for n in range(10)],
    )


def test_it_evicts_the_oldest_trait_and_preference_of_a_full_profile(keys, system):
    _full_profile(keys, system)

    change = profiles.change_profile(
        keys, system, "speaker", "u1", add_traits=["night owl"], add_preferences=["window seats"]
    )

    data = change.profile.payload
    assert data["traits"] == [*(f"trait {n}" for n in range(1, 20)), "night owl"]
    assert data["preferences"] == [*(f"preference {n}" for n in range(1, 10)), "window seats"]
    assert change.evicted == {"traits": ["trait 0"], "preferences": ["preference 0"]}
    assert _last_audit().payload["metadata"] == {
        "version": 2,
        "evicted": {"traits": ["trait 0"], "preferences": ["preference 0"]},
    }
    # the stored row answers update_profile too, and a full profile keeps taking updates
    row = profiles.update_profile(keys, system, "speaker", "u1", add_traits=["early riser"])
    assert row.payload["traits"][0] == "trait 2" and len(row.payload["traits"]) == 20


def test_it_exposes_item_eviction_for_imports():
    assert profiles.apply_items(["a", "b"], ["c"], [], 2) == (["b", "c"], ["a"])
    assert profiles.apply_items(["a", "b"], ["B", "c"], ["a"], 2) == (["b", "c"], [])
    assert profiles.apply_items([], [f"t{n}" for n in range(25)], [], 20) == (
        [f"t{n}" for n in range(5, 25)],
        [f"t{n}" for n in range(5)],
    )


def test_it_cuts_notes_at_the_limit_and_says_so(keys, system):
    change = profiles.change_profile(keys, system, "session", notes="n" * 2500)

    assert change.profile.payload["notes"] == "n" * 2000
    assert change.adjusted == ["notes"]
    assert _last_audit().payload["metadata"] == {"version": 1, "adjusted": ["notes"]}
    assert profiles.change_profile(keys, system, "session", notes="short").adjusted == []


def test_it_appends_a_line_to_the_notes(keys, system):
    first = profiles.change_profile(keys, system, "session", append_notes="Plans a trip in May")
    assert first.profile.payload["notes"] == "Plans a trip in May"
    second = profiles.change_profile(keys, system, "session", append_notes="Prefers trains  ")
    assert second.profile.payload["notes"] == "Plans a trip in May\nPrefers trains"
    assert second.adjusted == []

    profiles.change_profile(keys, system, "session", notes="n" * 1995)
    cut = profiles.change_profile(keys, system, "session", append_notes="one more line")
    assert cut.profile.payload["notes"] == "n" * 1995 + "\none "
    assert cut.adjusted == ["notes"]


def test_it_refuses_a_stale_if_version_and_changes_nothing(keys, system):
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice")
    profiles.update_profile(keys, system, "speaker", "u1", add_traits=["kind"])
    versions, audits = ProfileVersion.objects.count(), AuditEntry.objects.count()

    with pytest.raises(Conflict) as caught:
        profiles.update_profile(keys, system, "speaker", "u1", name="Alicia", if_version=1)

    assert caught.value.current_version == 2
    assert (ProfileVersion.objects.count(), AuditEntry.objects.count()) == (versions, audits)
    assert profiles.get_profile(keys, "speaker", "u1")[0]["name"] == "Alice"
    assert profiles.update_profile(keys, system, "speaker", "u1", name="Alicia", if_version=2).version == 3


def test_it_checks_if_version_against_a_missing_profile_as_version_0(keys, system):
    with pytest.raises(Conflict) as caught:
        profiles.update_profile(keys, system, "session", notes="x", if_version=3)
    assert caught.value.current_version == 0
    assert profiles.update_profile(keys, system, "session", notes="x", if_version=0).version == 1
    with pytest.raises(ValidationError) as refused:
        profiles.update_profile(keys, system, "session", notes="x", if_version=-1)
    assert refused.value.field == "if_version"


def test_it_refuses_a_stale_whole_profile_replacement(keys, system):
    profiles.update_profile(keys, system, "session", name="Travel club")
    profiles.update_profile(keys, system, "session", name="Hiking club")

    with pytest.raises(Conflict) as caught:
        profiles.replace_profile(keys, system, "session", "", {"name": "Chess club"}, if_version=1)

    assert caught.value.current_version == 2
    assert profiles.get_profile(keys, "session")[0]["name"] == "Hiking club"
    assert profiles.replace_profile(keys, system, "session", "", {"name": "Chess club"}, if_version=2).version == 3
