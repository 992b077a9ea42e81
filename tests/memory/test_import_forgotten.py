"""An import never brings back what was deleted or erased here (imports/forgotten.py): re-importing
an export taken before a delete, or before a person's erasure, skips those records and says so."""

from __future__ import annotations

import json

import pytest

from memconsole.memory import episodes, erasure, exports, facts, imports, profiles
from memconsole.memory.models import Episode, Profile

pytestmark = pytest.mark.django_db(transaction=True)


def _export(tmp_path, keys, system):
    path = tmp_path / "before.json"
    path.write_text("".join(exports.stream_scope_export(keys, system)), encoding="utf-8")
    return path


def _reimport(path, keys, system, **options):
    return imports.import_file(
        path, "memconsole", bot_uuid=keys.bot_uuid, session_name=keys.session_name, actor=system, **options
    )


def test_a_reimported_export_does_not_revive_a_deleted_episode(tmp_path, keys, system):
    kept = episodes.remember(keys, system, "Alice likes green tea", sender_id="u1").episode
    gone = episodes.remember(keys, system, "Alice's phone number is 555-0100", sender_id="u1").episode
    path = _export(tmp_path, keys, system)
    episodes.delete(keys, system, [gone.episode_id])

    preview = _reimport(path, keys, system, dry_run=True)
    report = _reimport(path, keys, system)

    for answer in (preview, report):
        assert answer.episodes == 0
        reasons = {item["id"]: item["kind"] for item in answer.conflicts}
        assert reasons == {kept.episode_id: "exists", gone.episode_id: "deleted_here"}, answer.conflicts
    assert [episode.content for episode in Episode.objects.all()] == ["Alice likes green tea"]


def test_a_langbot_file_imported_again_does_not_revive_what_was_deleted_since(tmp_path, keys, system):
    """The same LangBot export imported twice: the memory deleted in between is matched by the id
    it was imported under (the delete entry names its id here), and stays deleted."""
    document = {
        "version": 1,
        "scope_key": "old-bot:group_100",
        "episodes": [
            {"id": "lb-1", "content": "Alice likes green tea", "status": "active"},
            {"id": "lb-2", "content": "Alice's phone number is 555-0100", "status": "active"},
        ],
    }
    path = tmp_path / "langbot.json"
    path.write_text(json.dumps(document), encoding="utf-8")

    def langbot_import():
        return imports.import_file(
            path, "langbot", bot_uuid=keys.bot_uuid, session_name=keys.session_name, actor=system
        )

    assert langbot_import().episodes == 2
    phone = Episode.objects.get(imported_episode_id="lb-2")
    episodes.delete(keys, system, [phone.episode_id])

    again = langbot_import()

    assert again.episodes == 0
    assert {item["id"]: item["kind"] for item in again.conflicts} == {"lb-1": "exists", "lb-2": "deleted_here"}
    assert [episode.content for episode in Episode.objects.all()] == ["Alice likes green tea"]


def test_an_erased_person_does_not_come_back_from_an_old_export(tmp_path, keys, system):
    episodes.remember(keys, system, "Bob plays the cello", sender_id="u-bob", sender_name="Bob")
    episodes.remember(keys, system, "Ann lives in Lyon", sender_id="u-ann", sender_name="Ann")
    profiles.change_profile(keys, system, "speaker", "u-ann", name="Ann", add_traits=["night owl"])
    facts.remember_fact(keys, system, "u-ann", "city", "Lyon")
    path = _export(tmp_path, keys, system)
    document = json.loads(path.read_text(encoding="utf-8"))
    assert "u-ann" in json.dumps(document)  # the old file names her
    erasure.erase_subject("u-ann", bot_uuid=keys.bot_uuid, actor=system)
    Episode.objects.all().delete()  # the space emptied, so that only the erasure can keep her out

    report = _reimport(path, keys, system)

    assert list(Episode.objects.values_list("sender_id", flat=True)) == ["u-bob"]
    assert not Profile.objects.filter(sender_id="u-ann").exists()
    assert facts.recall_facts(keys, "u-ann") == []
    erased = [item for item in report.conflicts if item["kind"] == "erased"]
    assert {item["where"].split("[")[0] for item in erased} == {"episodes.episodes", "profiles.profiles", "facts"}


def test_an_erasure_for_another_bot_does_not_hold_back_this_one(tmp_path, keys, system):
    episodes.remember(keys, system, "Ann lives in Lyon", sender_id="u-ann")
    path = _export(tmp_path, keys, system)
    erasure.erase_subject("u-ann", bot_uuid="some-other-bot", actor=system)
    Episode.objects.all().delete()

    assert _reimport(path, keys, system).episodes == 1


@pytest.mark.parametrize("padded", ["\ufeffvictim-77", "victim-77\u200b", "\u00a0victim-77"])
def test_an_erased_person_padded_with_invisible_characters_stays_erased(tmp_path, keys, system, padded):
    """Found by probing imports: a file naming the erased id with a BOM or a zero-width space at
    its ends brought the person back, and their next erasure could not find them."""
    episodes.remember(keys, system, "Victim's address is 1 Main St", sender_id="victim-77")
    erasure.erase_subject("victim-77", bot_uuid=keys.bot_uuid, actor=system)
    document = {
        "version": 1,
        "scope_key": "old-bot:group_100",
        "episodes": [{"id": "lb-9", "content": "Victim's address is 1 Main St", "sender_id": padded}],
        "profiles": [{"type": "speaker", "sender_id": padded, "profile": {"name": "Vic"}}],
    }
    path = tmp_path / "langbot.json"
    path.write_text(json.dumps(document), encoding="utf-8")

    report = imports.import_file(path, "langbot", bot_uuid=keys.bot_uuid, session_name=keys.session_name, actor=system)

    assert (report.episodes, report.profiles) == (0, 0)
    assert {item["kind"] for item in report.conflicts} == {"erased"}
    assert not Episode.objects.exists() and not Profile.objects.filter(type="speaker").exists()


def test_an_imported_speaker_with_a_line_break_refuses_the_file(tmp_path, keys, system):
    document = {"version": 1, "episodes": [{"id": "lb-1", "content": "hello", "sender_id": "evil\n1"}]}
    path = tmp_path / "langbot.json"
    path.write_text(json.dumps(document), encoding="utf-8")

    with pytest.raises(imports.ImportFileError, match="sender_id"):
        imports.import_file(path, "langbot", bot_uuid=keys.bot_uuid, session_name=keys.session_name, actor=system)
    assert not Episode.objects.exists()
