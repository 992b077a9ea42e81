"""Imports that bring memory across faithfully (issue 14): deleted memories stay deleted, statuses
are normalised, a bare list is an episodes file, the original source and the original LangBot id
survive, and details (importance, profile limits, empty times) are adjusted and reported instead
of rejecting the file; wrong types still reject it whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from memconsole.lib import vectors
from memconsole.memory import episodes, exports, imports, profiles, retrieval
from memconsole.memory.audit import Actor
from memconsole.memory.imports import ImportFileError
from memconsole.memory.models import AuditEntry, Episode, Profile, Scope
from memconsole.memory.scopes import derive_scope

pytestmark = pytest.mark.django_db

ACTOR = Actor.system("import-tests")
TARGET = derive_scope("bot-new", "group_777")


def _write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def _envelope(episodes: list, **extra) -> dict:
    return {"version": 1, "scope_key": "old-bot:group_777", "episodes": episodes, "count": len(episodes), **extra}


def _import(path: Path, fmt: str = "langbot", **options):
    return imports.import_file(path, fmt, bot_uuid="bot-new", actor=ACTOR, **options)


def _nothing_written() -> None:
    assert not Episode.objects.exists()
    assert not Profile.objects.exists()
    assert not Scope.objects.exists()
    assert not AuditEntry.objects.filter(operation="import").exists()
    assert not vectors.list_collections()


def _by_old_id() -> dict[str, Episode]:
    return {e.imported_episode_id: e for e in Episode.objects.all()}


# --- deleted memories stay deleted ----------------------------------------------------------------


def _with_deleted() -> dict:
    return _envelope(
        [
            {"id": "ep-keep", "content": "Alice likes green tea", "status": "active"},
            {"id": "ep-gone", "content": "Alice's phone number is 555-0100", "status": "deleted"},
            {"id": "ep-gone-2", "content": "Alice's home address", "status": " Deleted "},
        ],
        statuses=["active", "superseded", "archived", "deleted"],
    )


@pytest.mark.parametrize("dry_run", [True, False])
def test_it_never_brings_a_deleted_memory_back(tmp_path, dry_run):
    path = _write_json(tmp_path / "episodes.json", _with_deleted())

    report = _import(path, dry_run=dry_run)

    assert report.skipped_deleted == 2 and report.episodes == 1
    assert report.as_dict()["skipped_deleted"] == 2
    assert [(s["kind"], s["where"], s["id"]) for s in report.skipped] == [
        ("deleted", "episodes[1]", "ep-gone"),
        ("deleted", "episodes[2]", "ep-gone-2"),
    ]
    assert report.statuses == {"active": 1}
    assert "2 deleted skipped" in report.summary()
    if dry_run:
        assert not Episode.objects.exists()
        return
    assert set(_by_old_id()) == {"ep-keep"}
    assert [h.episode.imported_episode_id for h in retrieval.recall(TARGET, "Alice's phone number", top_k=5)] == [
        "ep-keep"
    ]
    entry = AuditEntry.objects.get(operation="import")
    assert entry.payload["metadata"]["skipped_deleted"] == 2


def test_it_does_not_count_a_deleted_memory_as_a_conflict_on_a_second_run(tmp_path):
    path = _write_json(tmp_path / "episodes.json", _with_deleted())
    _import(path)

    again = _import(path)

    assert again.episodes == 0 and again.conflict_count == 1 and again.skipped_deleted == 2
    assert Episode.objects.count() == 1


# --- statuses ---------------------------------------------------------------------------------------


def test_it_normalises_statuses(tmp_path):
    path = _write_json(
        tmp_path / "episodes.json",
        _envelope(
            [
                {"id": "a", "content": "one", "status": "Archived "},
                {"id": "b", "content": "two", "status": "SUPERSEDED", "superseded_by": "c"},
                {"id": "c", "content": "three", "status": " Active"},
                {"id": "d", "content": "four", "status": ""},
                {"id": "e", "content": "five", "status": None},
            ]
        ),
    )

    report = _import(path)

    rows = _by_old_id()
    assert {k: e.status for k, e in rows.items()} == {
        "a": "archived",
        "b": "superseded",
        "c": "active",
        "d": "active",
        "e": "active",
    }
    assert rows["b"].superseded_by == rows["c"].episode_id
    assert report.statuses == {"archived": 1, "superseded": 1, "active": 3}
    assert report.warnings == [] and report.warning_count == 0


def test_it_reports_an_unknown_status_per_item_and_imports_it_as_active(tmp_path):
    path = _write_json(
        tmp_path / "episodes.json",
        _envelope(
            [
                {"id": "a", "content": "one", "status": "pending-review"},
                {"id": "b", "content": "two", "status": "active"},
                {"id": "c", "content": "three", "status": "Forgotten"},
            ]
        ),
    )

    report = _import(path, dry_run=True)

    assert report.episodes == 3 and report.statuses == {"active": 3}
    assert report.warning_count == 2
    assert [(w["kind"], w["where"], w["id"], w["scope_key"]) for w in report.warnings] == [
        ("unknown_status", "episodes[0]", "a", TARGET.scope_key),
        ("unknown_status", "episodes[2]", "c", TARGET.scope_key),
    ]
    assert "'pending-review'" in report.warnings[0]["message"] and "active" in report.warnings[0]["message"]
    assert report.as_dict()["warnings"] == report.warnings
    assert "2 warning(s)" in report.summary()


def test_it_warns_of_a_correction_that_points_at_no_episode(tmp_path):
    path = _write_json(
        tmp_path / "episodes.json",
        _envelope(
            [
                {"id": "a", "content": "Alice lives in Porto", "status": "superseded", "superseded_by": "missing"},
                {"id": "b", "content": "Alice lives in Lyon", "status": "active"},
            ]
        ),
    )

    report = _import(path)

    assert [(w["kind"], w["where"], w["id"]) for w in report.warnings] == [
        ("superseded_by_missing", "episodes[0]", "a")
    ]
    assert "'missing'" in report.warnings[0]["message"]
    assert _by_old_id()["a"].superseded_by == "" and _by_old_id()["a"].status == "superseded"


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        (  # Olga's memory "corrected" by Pete: a correction replaces only its own speaker's
            [
                {
                    "id": "a",
                    "content": "Olga likes jazz",
                    "sender_id": "olga",
                    "status": "superseded",
                    "superseded_by": "b",
                },
                {"id": "b", "content": "Correction: Olga likes jazz and blues", "sender_id": "pete"},
            ],
            [("superseded_by_other_speaker", "a")],
        ),
        ([{"id": "c", "content": "x", "status": "superseded", "superseded_by": "c"}], [("superseded_by_self", "c")]),
        (
            [
                {"id": "c", "content": "x", "status": "superseded", "superseded_by": "d"},
                {"id": "d", "content": "y", "status": "superseded", "superseded_by": "c"},
            ],
            [("superseded_by_cycle", "c"), ("superseded_by_cycle", "d")],
        ),
    ],
    ids=["other-speaker", "itself", "circle"],
)
def test_it_warns_of_supersede_links_a_live_write_never_makes_and_leaves_them_empty(tmp_path, records, expected):
    """Found by a user: these links were imported as they were, hiding a memory behind another
    person's, behind itself, or leaving nothing of a circle active."""
    path = _write_json(tmp_path / "episodes.json", _envelope(records))

    report = _import(path)

    assert [(w["kind"], w["id"]) for w in report.warnings] == expected
    assert all(_by_old_id()[old_id].superseded_by == "" for _kind, old_id in expected)


def test_it_keeps_a_link_to_the_same_speakers_correction(tmp_path):
    path = _write_json(
        tmp_path / "episodes.json",
        _envelope(
            [
                {
                    "id": "a",
                    "content": "Olga likes jazz",
                    "sender_id": "olga",
                    "status": "superseded",
                    "superseded_by": "b",
                },
                {"id": "b", "content": "Correction: Olga likes jazz and blues", "sender_id": "olga"},
            ]
        ),
    )

    report = _import(path)

    assert report.warnings == [] and _by_old_id()["a"].superseded_by == _by_old_id()["b"].episode_id


# --- a bare list ------------------------------------------------------------------------------------


def test_it_accepts_a_bare_list_of_episodes(tmp_path):
    path = _write_json(
        tmp_path / "episodes.json",
        [
            {"id": "a1b2c3d4e5f6", "content": "The group meets on Fridays", "tags": ["schedule"], "importance": 3},
            {"id": "0f9e8d7c6b5a", "content": "Bob brings the snacks", "status": "archived"},
        ],
    )

    report = _import(path, session_name="group_9")

    keys = derive_scope("bot-new", "group_9")
    rows = _by_old_id()
    assert report.episodes == 2 and set(rows) == {"a1b2c3d4e5f6", "0f9e8d7c6b5a"}
    assert {e.user_key for e in rows.values()} == {keys.user_key}
    assert rows["a1b2c3d4e5f6"].tags == ["schedule"] and rows["0f9e8d7c6b5a"].status == "archived"


def test_it_asks_for_a_session_for_a_bare_list(tmp_path):
    path = _write_json(tmp_path / "episodes.json", [{"content": "no scope in this file"}])

    with pytest.raises(ImportFileError, match="session name"):
        _import(path)

    _nothing_written()


def test_it_names_the_place_of_a_bad_record_in_a_bare_list(tmp_path):
    path = _write_json(tmp_path / "episodes.json", [{"content": "ok"}, "not an episode"])

    with pytest.raises(ImportFileError, match=r"^episodes\[1\]: an episode must be an object"):
        _import(path, session_name="group_9")

    _nothing_written()


def test_it_points_a_bare_list_given_as_memconsole_to_the_langbot_format(tmp_path):
    path = _write_json(tmp_path / "episodes.json", [{"content": "a memory"}])

    with pytest.raises(ImportFileError, match="langbot format"):
        _import(path, "memconsole", session_name="group_9")


# --- source, content, timestamps ------------------------------------------------------------------------


def test_it_keeps_the_original_source_and_marks_the_episode_imported(tmp_path):
    path = _write_json(
        tmp_path / "episodes.json",
        _envelope(
            [
                {"id": "a", "content": "one", "source": "agent"},
                {"id": "b", "content": "two", "source": " consolidation "},
                {"id": "c", "content": "three"},
            ]
        ),
    )

    _import(path)

    rows = _by_old_id()
    assert {e.source for e in rows.values()} == {"import"}
    assert {k: e.original_source for k, e in rows.items()} == {"a": "agent", "b": "consolidation", "c": ""}


def test_it_refuses_a_source_of_the_wrong_type(tmp_path):
    path = _write_json(tmp_path / "episodes.json", _envelope([{"content": "one", "source": {"kind": "agent"}}]))

    with pytest.raises(ImportFileError) as caught:
        _import(path)

    assert caught.value.message.startswith("episodes[0], field 'source': must be a string")
    _nothing_written()


def test_it_trims_content(tmp_path):
    path = _write_json(tmp_path / "episodes.json", _envelope([{"id": "a", "content": "  \n Alice likes tea \t "}]))

    _import(path)

    assert Episode.objects.get().content == "Alice likes tea"


def test_it_stamps_an_empty_timestamp_with_the_import_time_and_flags_it(tmp_path):
    path = _write_json(
        tmp_path / "episodes.json",
        _envelope(
            [
                {"id": "a", "content": "one", "timestamp": ""},
                {"id": "b", "content": "two", "timestamp": "   "},
                {"id": "c", "content": "three", "timestamp": "2024-04-01T09:30:00Z"},
                {"id": "d", "content": "four"},  # no time at all stays unknown
            ]
        ),
    )

    report = _import(path)

    rows = _by_old_id()
    assert rows["a"].timestamp == rows["a"].created_at and rows["b"].timestamp == rows["b"].created_at
    assert rows["c"].timestamp.isoformat() == "2024-04-01T09:30:00+00:00"
    assert rows["d"].timestamp is None
    assert [(w["kind"], w["id"]) for w in report.warnings] == [("timestamp_missing", "a"), ("timestamp_missing", "b")]


def test_it_stamps_a_timestamp_in_the_future_with_the_import_time_and_flags_it(tmp_path):
    # a live write refuses such a time; imported, it ranked as brand new until the year 9999
    path = _write_json(
        tmp_path / "episodes.json",
        _envelope(
            [
                {"id": "a", "content": "one", "timestamp": "9999-12-30T00:00:00Z"},
                {"id": "b", "content": "two", "timestamp": "2024-04-01T09:30:00Z"},
            ]
        ),
    )

    report = _import(path)

    rows = _by_old_id()
    assert rows["a"].timestamp == rows["a"].created_at
    assert rows["b"].timestamp.isoformat() == "2024-04-01T09:30:00+00:00"
    assert [(w["kind"], w["id"]) for w in report.warnings] == [("timestamp_future", "a")]


# --- importance and profile limits are adjusted, not refused -------------------------------------------------


def test_it_clamps_importance_outside_1_to_5_and_warns(tmp_path):
    path = _write_json(
        tmp_path / "episodes.json",
        _envelope(
            [
                {"id": "a", "content": "one", "importance": 7},
                {"id": "b", "content": "two", "importance": "0"},
                {"id": "c", "content": "three", "importance": -2},
                {"id": "d", "content": "four", "importance": "4"},
                {"id": "e", "content": "five", "importance": 9.0},
            ]
        ),
    )

    report = _import(path)

    assert {k: e.importance for k, e in _by_old_id().items()} == {"a": 5, "b": 1, "c": 1, "d": 4, "e": 5}
    assert [(w["kind"], w["where"], w["id"]) for w in report.warnings] == [
        ("importance_clamped", "episodes[0]", "a"),
        ("importance_clamped", "episodes[1]", "b"),
        ("importance_clamped", "episodes[2]", "c"),
        ("importance_clamped", "episodes[4]", "e"),
    ]
    assert "7" in report.warnings[0]["message"] and "5" in report.warnings[0]["message"]


def _crowded_profiles() -> dict:
    return {
        "version": 1,
        "scope_key": "old-bot:group_777",
        "profiles": [
            {
                "type": "speaker",
                "scope_key": "old-bot:group_777",
                "sender_id": "u1",
                "profile": {
                    "name": "Alice",
                    "traits": [f"trait {i}" for i in range(25)],
                    "preferences": [f"likes {i}" for i in range(12)],
                    "notes": "n" * 2500,
                },
            },
            {"type": "session", "profile": {"name": "Tea club", "traits": ["friendly"]}},
        ],
    }


def test_it_evicts_profile_items_beyond_the_limits_and_warns(tmp_path):
    path = _write_json(tmp_path / "profiles.json", _crowded_profiles())

    report = _import(path)

    data, _ = profiles.get_profile(TARGET, "speaker", "u1")
    assert data["traits"] == [f"trait {i}" for i in range(5, 25)]  # the oldest (first) ones go
    assert data["preferences"] == [f"likes {i}" for i in range(2, 12)]
    assert data["notes"] == "n" * 2000
    assert [(w["kind"], w["where"], w["id"]) for w in report.warnings] == [
        ("traits_evicted", "profiles[0]", "speaker:u1"),
        ("preferences_evicted", "profiles[0]", "speaker:u1"),
        ("notes_cut", "profiles[0]", "speaker:u1"),
    ]
    assert "trait 0" in report.warnings[0]["message"] and "5" in report.warnings[0]["message"]
    session, _ = profiles.get_profile(TARGET, "session")
    assert session["traits"] == ["friendly"]


def test_it_evicts_only_after_dropping_duplicates(tmp_path):
    doc = _crowded_profiles()
    doc["profiles"][0]["profile"]["traits"] = [f"trait {i % 20}" for i in range(30)]
    path = _write_json(tmp_path / "profiles.json", doc)

    report = _import(path, dry_run=True)

    assert "traits_evicted" not in {w["kind"] for w in report.warnings}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda e: e.update(content=42), "episodes[1], field 'content': must be a string"),
        (lambda e: e.update(content=["a"]), "episodes[1], field 'content': must be a string"),
        (lambda e: e.update(tags=5), "episodes[1], field 'tags': must be a list of strings or a comma-joined string"),
        (lambda e: e.update(tags={"a": 1}), "episodes[1], field 'tags': must be a list"),
        (lambda e: e.update(tags=[1, 2]), "episodes[1], field 'tags': must be strings"),
        (lambda e: e.update(importance="high"), "episodes[1], field 'importance': must be a whole number"),
        (lambda e: e.update(importance=2.5), "episodes[1], field 'importance': must be a whole number"),
        (lambda e: e.update(importance=True), "episodes[1], field 'importance': must be a whole number"),
        (lambda e: e.update(status=3), "episodes[1], field 'status': must be a string"),
    ],
)
def test_it_still_rejects_a_wrong_type_whole(tmp_path, change, message):
    records = [
        {"id": "a", "content": "one", "importance": 9},  # adjusted, but the file is refused all the same
        {"id": "b", "content": "two"},
        {"id": "c", "content": "three", "status": "deleted"},
    ]
    change(records[1])
    path = _write_json(tmp_path / "episodes.json", _envelope(records))

    with pytest.raises(ImportFileError) as caught:
        _import(path)

    assert caught.value.message.startswith(message)
    _nothing_written()


def test_it_still_rejects_profile_items_of_the_wrong_type(tmp_path):
    doc = _crowded_profiles()
    doc["profiles"][0]["profile"]["traits"] = "curious"
    path = _write_json(tmp_path / "profiles.json", doc)

    with pytest.raises(ImportFileError) as caught:
        _import(path)

    assert caught.value.message.startswith("profiles[0], field 'profile.traits'")
    _nothing_written()


# --- the original LangBot id survives a memconsole round trip ------------------------------------------------


def test_it_keeps_the_original_langbot_id_through_a_memconsole_export(tmp_path, system):
    langbot_file = _write_json(
        tmp_path / "langbot.json",
        _envelope(
            [
                {"id": "lb-old", "content": "Alice lives in Porto", "status": "superseded", "superseded_by": "lb-new"},
                {"id": "lb-new", "content": "Alice lives in Lisbon", "source": "agent"},
            ]
        ),
    )
    _import(langbot_file)
    export = json.loads("".join(exports.stream_scope_export(TARGET, system)))
    export_file = _write_json(tmp_path / "export.json", export)

    report = imports.import_file(export_file, "memconsole", bot_uuid="bot-copy", session_name="group_copy", actor=ACTOR)

    copy_keys = derive_scope("bot-copy", "group_copy")
    copies = {e.imported_episode_id: e for e in Episode.objects.filter(user_key=copy_keys.user_key)}
    assert report.episodes == 2 and set(copies) == {"lb-old", "lb-new"}
    assert copies["lb-old"].superseded_by == copies["lb-new"].episode_id
    assert copies["lb-new"].original_source == "agent" and copies["lb-new"].source == "import"

    # Back into the first scope: every episode is already there (by its LangBot id).
    again = imports.import_file(export_file, "memconsole", bot_uuid="bot-new", session_name="group_777", actor=ACTOR)
    assert again.episodes == 0 and again.conflict_count == 2


# --- the command line -------------------------------------------------------------------------------------


def test_it_prints_skipped_and_warned_items_on_the_command_line(tmp_path, capsys):
    doc = _with_deleted()
    doc["episodes"][0]["importance"] = 8
    path = _write_json(tmp_path / "episodes.json", doc)

    call_command(
        "import_memory",
        str(path),
        "--format",
        "langbot",
        "--bot-uuid",
        "bot-cli",
        "--isolation",
        "session",
        "--dry-run",
    )

    out = capsys.readouterr().out
    assert "skipped (deleted in the source): episodes[1] (ep-gone)" in out
    assert "warning: episodes[0] (ep-keep): importance 8 is outside 1-5; stored as 5" in out
    assert "2 deleted skipped" in out and "1 warning(s)" in out


def test_an_export_imported_elsewhere_keeps_each_episodes_query_id(tmp_path):
    source = derive_scope("bot-old", "group_rt", "session")
    episodes.remember(source, ACTOR, "Alice likes green tea", query_id="qid-1", sender_id="u1")
    document = "".join(exports.stream_scope_export(source, ACTOR))
    path = tmp_path / "export.json"
    path.write_text(document)

    _import(path, "memconsole", session_name="group_rt_copy")

    copy = Episode.objects.get(user_key=derive_scope("bot-new", "group_rt_copy", "session").user_key)
    assert copy.query_id == "qid-1"


def test_it_refuses_a_version_of_true_which_python_counts_as_1(tmp_path):
    path = _write_json(tmp_path / "episodes.json", {**_envelope([{"id": "a", "content": "one"}]), "version": True})
    with pytest.raises(ImportFileError, match="only version 1 is understood"):
        _import(path)
    _nothing_written()
