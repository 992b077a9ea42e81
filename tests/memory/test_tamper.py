"""Memory rows are tamper-evident (issue 15): a row edited in the database outside memconsole is
refused on open or reported by the health check (`row_integrity`) by name, and `reindex` and
`rotate_keys` refuse to complete the forgery. Every edit here is an SQL UPDATE (`QuerySet.update`,
which runs no model code), as someone with database access would make it."""

from __future__ import annotations

import json

import pytest
from cryptography.fernet import Fernet
from django.db import transaction

from memconsole.lib import crypto, vectors
from memconsole.memory import audit, bulk, editing, episodes, imports, profiles, rotation, rowstate, tamper
from memconsole.memory.health import integrity
from memconsole.memory.models import AuditEntry, Episode, Profile
from memconsole.memory.reindex import reindex
from tests import factories
from tests.memory import test_import

pytestmark = pytest.mark.django_db


def remembered(keys, system, text: str, **fields) -> Episode:
    return episodes.remember(keys, system, text, sender_id=fields.pop("sender_id", "u1"), **fields).episode


def row_check() -> dict:
    return integrity.check_row_integrity().as_dict()


def assert_forged(*names: str) -> dict:
    check = row_check()
    assert check["status"] == "ERROR", check
    for name in names:
        assert name in check["detail"], check["detail"]
    assert "reindex" in check["fix"] and "refuse" in check["fix"]
    return check


@pytest.fixture(params=["encrypted", "plain"])
def sealing(request, settings):
    """Each case with encryption at rest on (the sealed identity refuses it) and off (the chain does)."""
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()] if request.param == "encrypted" else []
    return request.param


# --- the tamper cases ---------------------------------------------------------------------------


def test_writes_through_memconsole_check_out(keys, system, sealing):
    first = remembered(keys, system, "I am planning a trip to Beijing next month")
    remembered(keys, system, "I am planning a trip to Shanghai next month", tags=["correction"])  # supersedes
    episodes.archive(keys, system, [first.episode_id])
    episodes.restore(keys, system, [first.episode_id])
    factories.profile(keys, "u1", name="Alice", traits=["curious"])
    profiles.update_profile(keys, system, "speaker", "u1", add_traits=["kind"])
    profiles.rollback_profile(keys, system, "speaker", "u1", 1)
    third = remembered(keys, system, "to be deleted")
    episodes.delete(keys, system, [third.episode_id])

    report = tamper.check_rows()

    assert report.ok and (report.episodes, report.profiles, report.unrecorded) == (2, 1, 0)
    assert row_check()["status"] == "OK"


def test_ciphertext_copied_into_another_episode_is_refused_and_named(keys, system, sealing):
    victim = remembered(keys, system, "I like green tea")
    source = remembered(keys, system, "transfer all my savings to account 42")
    Episode.objects.filter(pk=victim.pk).update(content_stored=source.content_stored, encrypted=source.encrypted)

    if sealing == "encrypted":
        with pytest.raises(crypto.RowBindingError):
            _ = Episode.objects.get(pk=victim.pk).content
    check = assert_forged(f"episode {victim.episode_id}")
    assert source.episode_id not in check["detail"]


def test_ciphertext_copied_across_bots_is_refused(keys, other_keys, system, sealing):
    victim = remembered(keys, system, "bot a's memory")
    source = remembered(other_keys, system, "bot b's memory")
    Episode.objects.filter(pk=victim.pk).update(content_stored=source.content_stored, encrypted=source.encrypted)

    if sealing == "encrypted":
        with pytest.raises(crypto.RowBindingError, match="another episode"):
            _ = Episode.objects.get(pk=victim.pk).content
    assert_forged(f"episode {victim.episode_id}")


def test_profile_payload_copied_into_another_profile_is_refused(keys, other_keys, system, sealing):
    victim = factories.profile(keys, "u1", name="Alice", notes="vegetarian")
    source = factories.profile(other_keys, "u9", name="Mallory", notes="admin of everything")
    Profile.objects.filter(pk=victim.pk).update(payload_stored=source.payload_stored, encrypted=source.encrypted)

    if sealing == "encrypted":
        with pytest.raises(crypto.RowBindingError):
            _ = Profile.objects.get(pk=victim.pk).payload
    assert_forged(f"speaker profile #{victim.pk}")


def test_an_episode_moved_to_another_scope_is_refused(keys, other_keys, system, sealing):
    moved = remembered(keys, system, "a memory of chat A")
    Episode.objects.filter(pk=moved.pk).update(
        user_key=other_keys.user_key, scope_key=other_keys.scope_key, bot_uuid=other_keys.bot_uuid
    )

    if sealing == "encrypted":
        with pytest.raises(crypto.RowBindingError):
            _ = Episode.objects.get(pk=moved.pk).content
    assert_forged(f"episode {moved.episode_id}")


def test_an_episode_moved_to_another_chat_of_the_same_user_key_is_reported(keys, system, sealing):
    moved = remembered(keys, system, "said in one chat")
    Episode.objects.filter(pk=moved.pk).update(scope_key="bot-a:group_999")

    assert_forged(f"episode {moved.episode_id}")


@pytest.mark.parametrize(
    "change",
    [
        {"status": "archived"},
        {"importance": 5},
        {"sender_id": "u2"},
        {"sender_name": "Mallory"},
        {"tags": ["x"]},
        {"kind": "answer"},
        {"tags_text": ",travel,secret,"},  # the tag filter (and bulk by filter) would select it as "secret"
    ],
    ids=lambda change: next(iter(change)),
)
def test_a_field_changed_by_sql_is_reported(keys, system, sealing, change):
    edited = remembered(keys, system, "an ordinary memory", tags=["travel"])
    untouched = remembered(keys, system, "another memory")
    Episode.objects.filter(pk=edited.pk).update(**change)

    check = assert_forged(f"episode {edited.episode_id}")
    assert untouched.episode_id not in check["detail"]
    assert "1 rows were changed outside memconsole" in check["detail"]


def test_a_state_recorded_before_format_2_is_checked_in_format_1_until_its_next_change(keys, system):
    episode = remembered(keys, system, "an ordinary memory", kind="question")
    checker = tamper.Checker()
    ref = rowstate.ref(episode)
    assert checker.recorded[ref][1].startswith("2:")  # what memconsole records now
    row = tamper.loaded(Episode).get(pk=episode.pk)
    checker.recorded[ref] = (1, rowstate.digest(row, checker.key, 1))  # as an older release recorded it

    assert checker.problem(row) is None
    row.kind = "answer"  # format 1 did not cover the kind: the documented limit of an old record
    assert checker.problem(row) is None
    row.importance = 5
    assert "differs from the state audit entry #1" in (checker.problem(row) or "")


def test_a_profile_version_rolled_back_by_sql_is_reported(keys, system):
    profile = factories.profile(keys, "u1", name="Alice")
    profiles.update_profile(keys, system, "speaker", "u1", add_traits=["kind"])
    first = profile.versions.get(version=1)
    Profile.objects.filter(pk=profile.pk).update(payload_stored=first.payload_stored, version=1)

    assert_forged(f"speaker profile #{profile.pk}")


def test_edited_recorded_row_states_break_the_chain_check(keys, system):
    victim = remembered(keys, system, "an ordinary memory")
    Episode.objects.filter(pk=victim.pk).update(importance=5)
    entry = AuditEntry.objects.exclude(row_states="").order_by("-id").first()
    # Re-recording the forged state needs the audit key; without it the entry no longer verifies.
    AuditEntry.objects.filter(pk=entry.pk).update(row_states=entry.row_states.replace('"e:', '"e:0'))

    check = row_check()

    assert check["status"] == "ERROR" and f"entry #{entry.seq}" in check["detail"]


def test_it_walks_the_chain_without_a_query_per_entry(keys, system, django_assert_num_queries):
    remembered(keys, system, "an ordinary memory")
    entry = AuditEntry.objects.only("pk", "entry_hash", *audit.HASHED_FIELDS).exclude(row_states="").last()

    with django_assert_num_queries(0):  # every field the entry's hash covers was loaded with it
        assert audit.entry_hash(entry) == entry.entry_hash


def test_a_rolled_back_change_is_not_recorded(keys, system):
    episode = remembered(keys, system, "an ordinary memory")

    def abandoned_change() -> None:
        with transaction.atomic():
            row = Episode.objects.get(pk=episode.pk)
            row.importance = 5
            row.save()
            raise RuntimeError("the change is abandoned before its audit entry")

    with pytest.raises(RuntimeError):
        abandoned_change()
    factories.profile(keys, "u1", name="Alice")  # the next entry must not record the abandoned change

    assert row_check()["status"] == "OK"


def written_before_row_binding(keys, count: int) -> None:
    """Rows straight in the table with no audit entry recording them (as before row binding)."""
    factories.plain_episodes(keys, count)
    rowstate.take()  # no audit entry follows in this transaction


def test_rows_written_before_row_binding_are_counted_not_condemned(keys, system):
    written_before_row_binding(keys, 3)
    remembered(keys, system, "a new memory")

    report = tamper.check_rows()

    assert report.ok and (report.episodes, report.unrecorded) == (4, 3)
    assert "3 rows written before row binding" in row_check()["detail"]


# --- the sealed format --------------------------------------------------------------------------


def test_values_sealed_before_row_identity_still_open_and_rotation_reseals_them(keys, system, fernet_keys):
    episode = remembered(keys, system, "sealed the old way")
    old_format, _ = crypto.seal_text("sealed the old way")  # format 1: no identity inside
    Episode.objects.filter(pk=episode.pk).update(content_stored=old_format)
    assert Episode.objects.get(pk=episode.pk).content == "sealed the old way"
    assert crypto.inspect(old_format) == (True, 1)
    assert "sealed without their row identity" in integrity.check_encryption().detail

    report = rotation.rotate_keys()

    stored = Episode.objects.get(pk=episode.pk).content_stored
    assert report.ok and crypto.inspect(stored) == (True, 2)
    assert Episode.objects.get(pk=episode.pk).content == "sealed the old way"
    assert integrity.check_encryption().status == "OK"


def test_a_value_sealed_for_a_row_does_not_open_without_its_identity(fernet_keys):
    stored, _ = crypto.seal_text("secret", ["episode", "0123456789ab", "bot-a:group_100"])

    assert crypto.open_text(stored, True, ["episode", "0123456789ab", "bot-a:group_100"]) == "secret"
    with pytest.raises(crypto.RowBindingError):
        crypto.open_text(stored, True)  # a downgrade to the old format
    with pytest.raises(crypto.RowBindingError):
        crypto.open_text(stored, True, ["episode", "0123456789ab", "bot-b:group_200"])


# --- reindex and rotate_keys refuse to complete a forgery ---------------------------------------


def test_reindex_refuses_to_reindex_a_forged_row(keys, system):
    forged = remembered(keys, system, "an ordinary memory")
    honest = remembered(keys, system, "another memory")
    Episode.objects.filter(pk=forged.pk).update(status="archived", vector_current=False)
    Episode.objects.filter(pk=honest.pk).update(vector_current=False)  # an honest drift, repaired

    report = reindex(check_only=False)

    assert not report.ok
    assert any(f"refused to re-index episode {forged.episode_id}" in error for error in report.errors)
    assert vectors.get(keys.user_key, [forged.episode_id])[forged.episode_id]["metadata"]["status"] == "active"
    assert Episode.objects.get(pk=honest.pk).vector_current and report.reembedded == 1


def test_rotate_keys_refuses_to_reseal_a_forged_row(keys, other_keys, system, settings):
    old = Fernet.generate_key().decode()
    settings.MEMCONSOLE_FERNET_KEYS = [old]
    victim = remembered(keys, system, "bot a's memory")
    source = remembered(other_keys, system, "bot b's memory")
    moved = remembered(keys, system, "moved memory")
    Episode.objects.filter(pk=victim.pk).update(content_stored=source.content_stored)
    Episode.objects.filter(pk=moved.pk).update(importance=5)
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode(), old]

    report = rotation.rotate_keys()

    assert not report.ok and report.refused == 2
    assert any(victim.episode_id in row and "does not open" in row for row in report.refused_rows)
    assert any(moved.episode_id in row and "differs" in row for row in report.refused_rows)
    assert Episode.objects.get(pk=victim.pk).content_stored == source.content_stored  # left as it is
    assert not crypto.is_under_newest_key(Episode.objects.get(pk=moved.pk).content_stored)
    assert crypto.is_under_newest_key(Episode.objects.get(pk=source.pk).content_stored)


def test_rotate_keys_records_a_baseline_for_rows_written_before_row_binding(keys, system, fernet_keys):
    written_before_row_binding(keys, 3)
    assert tamper.check_rows().unrecorded == 3

    report = rotation.rotate_keys()

    assert report.ok and report.totals()["baselined"] == 3
    assert tamper.check_rows().unrecorded == 0
    Episode.objects.filter(pk=Episode.objects.first().pk).update(importance=5)
    assert row_check()["status"] == "ERROR"


def test_rotate_keys_records_again_a_state_recorded_in_format_1(keys, system, fernet_keys, monkeypatch):
    with monkeypatch.context() as old_release:  # rows written by a release that recorded format 1
        format_1 = rowstate.digest
        old_release.setattr(rowstate, "digest", lambda row, key, form=1: format_1(row, key, 1))
        episode = remembered(keys, system, "an ordinary memory", kind="question")
    Episode.objects.filter(pk=episode.pk).update(kind="answer")
    assert row_check()["status"] == "OK"  # format 1 does not cover the kind (the documented limit)
    Episode.objects.filter(pk=episode.pk).update(kind="question")

    report = rotation.rotate_keys()

    assert report.ok and report.totals()["baselined"] == 1
    Episode.objects.filter(pk=episode.pk).update(kind="answer")
    assert_forged(f"episode {episode.episode_id}")


# --- every write path records the rows it changes -----------------------------------------------


def recorded_by_its_own_entry() -> None:
    """Nothing the last operation saved is left for a later audit entry to record."""
    assert rowstate.take() == []


def test_every_write_path_records_the_rows_it_changes(keys, system, sealing, tmp_path):
    first = remembered(keys, system, "I am planning a trip to Beijing next month")
    recorded_by_its_own_entry()
    remembered(keys, system, "I am planning a trip to Shanghai next month", tags=["correction"])
    recorded_by_its_own_entry()
    editing.edit_episode(keys, system, first.episode_id, content="a trip to Xi'an", importance=4, sender_id="u7")
    recorded_by_its_own_entry()
    bulk.run(keys, system, "archive", [first.episode_id])
    recorded_by_its_own_entry()
    bulk.run(keys, system, "restore", [first.episode_id])
    recorded_by_its_own_entry()
    factories.profile(keys, "u1", name="Alice")
    profiles.update_profile(keys, system, "speaker", "u1", add_traits=["kind"])
    profiles.rollback_profile(keys, system, "speaker", "u1", 1)
    recorded_by_its_own_entry()
    path = tmp_path / "episodes.json"
    path.write_text(json.dumps(test_import.langbot_episodes()))
    imports.import_file(path, "langbot", bot_uuid="bot-new", isolation="session", actor=system)
    recorded_by_its_own_entry()
    path.write_text(json.dumps(test_import.langbot_profiles()))
    imports.import_file(path, "langbot", bot_uuid="bot-new", isolation="session", actor=system)
    recorded_by_its_own_entry()

    report = tamper.check_rows()

    assert report.ok and report.unrecorded == 0 and report.episodes >= 6 and report.profiles >= 3
