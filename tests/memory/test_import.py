"""Imports: every format built for real in the test, checked field by field; atomic, dry-run,
conflicts, bad files rejected whole with a place, the round trip through our own export."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from memconsole.lib import vectors
from memconsole.memory import episodes, exports, imports, profiles, retrieval
from memconsole.memory.audit import Actor, verify_audit_chain
from memconsole.memory.botmemory_models import Fact, WindowMessage
from memconsole.memory.errors import PermissionDenied
from memconsole.memory.imports import ImportFileError
from memconsole.memory.models import AuditEntry, Episode, EpisodeCounts, Profile, Scope
from memconsole.memory.scopes import derive_scope

from .conftest import remember_holding_the_chain

pytestmark = pytest.mark.django_db

ACTOR = Actor.system("import-tests")


def _write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def _nothing_written() -> None:
    assert not Episode.objects.exists()
    assert not Profile.objects.exists()
    assert not Scope.objects.exists()
    assert not AuditEntry.objects.filter(operation="import").exists()
    assert not vectors.list_collections()


def langbot_episodes(**overrides) -> dict:
    envelope = {
        "version": 1,
        "exported_at": "2024-05-01T08:00:00Z",
        "scope_key": "old-bot-uuid:group_777",
        "user_key": "old-bot-uuid:group_777",
        "collection_id": "ltm_0123",
        "statuses": ["active", "superseded", "archived"],
        "episodes": [
            {
                "id": "ep-one",
                "content": "Alice prefers green tea in the morning",
                "tags": "drink, preference",
                "importance": "4",
                "timestamp": "2024-04-01T09:30:00Z",
                "sender_id": "u1",
                "sender_name": "Alice",
                "status": "superseded",
                "superseded_by": "ep-two",
            },
            {
                "id": "ep-two",
                "text": "爱丽丝其实更喜欢乌龙茶",
                "tags": "drink,correction",
                "importance": "5",
                "timestamp": "2024-04-02T10:00:00Z",
                "sender_id": "u1",
                "sender_name": "爱丽丝",
                "status": "active",
                "superseded_by": "",
            },
            {"id": "ep-three", "content": "The group meets on Fridays"},  # every optional field missing
            {"id": "ep-four", "content": "An old plan", "status": "deleted-in-v2", "importance": 1},
        ],
        "count": 4,
    }
    envelope.update(overrides)
    return envelope


def langbot_profiles() -> dict:
    return {
        "version": 1,
        "exported_at": "2024-05-01T08:00:00Z",
        "scope_key": "old-bot-uuid:group_777",
        "user_key": "old-bot-uuid:group_777",
        "profiles": [
            {
                "type": "session",
                "scope_key": "old-bot-uuid:group_777",
                "profile": {
                    "name": "茶友群",
                    "traits": ["friendly"],
                    "preferences": [],
                    "notes": "tea lovers",
                    "updated_at": "2024-04-03T00:00:00Z",
                },
            },
            {
                "type": "speaker",
                "scope_key": "old-bot-uuid:group_777",
                "sender_id": "u1",
                "profile": {"name": "Alice", "traits": ["curious", "kind"], "preferences": ["oolong"], "notes": ""},
            },
        ],
        "count": 2,
    }


# --- langbot ------------------------------------------------------------------------------------


def test_it_imports_langbot_episodes_field_by_field(tmp_path):
    path = _write_json(tmp_path / "episodes.json", langbot_episodes())

    report = imports.import_file(path, "langbot", bot_uuid="bot-new", isolation="session", actor=ACTOR)

    keys = derive_scope("bot-new", "group_777", "session")
    rows = {e.imported_episode_id: e for e in Episode.objects.all()}
    assert set(rows) == {"ep-one", "ep-two", "ep-three", "ep-four"}
    one, two, three, four = rows["ep-one"], rows["ep-two"], rows["ep-three"], rows["ep-four"]
    for row in rows.values():
        assert row.user_key == keys.user_key and row.scope_key == keys.scope_key and row.bot_uuid == "bot-new"
        assert row.source == "import" and len(row.episode_id) == 12 and row.episode_id not in rows
        assert row.vector_current
    assert one.content == "Alice prefers green tea in the morning"
    assert one.tags == ["drink", "preference"] and one.tags_text == ",drink,preference,"
    assert one.importance == 4
    assert one.timestamp == datetime(2024, 4, 1, 9, 30, tzinfo=UTC)
    assert (one.sender_id, one.sender_name) == ("u1", "Alice")
    assert one.status == "superseded" and one.superseded_by == two.episode_id
    assert two.content == "爱丽丝其实更喜欢乌龙茶" and two.sender_name == "爱丽丝" and two.importance == 5
    assert three.tags == [] and three.importance == 2 and three.timestamp is None
    assert (three.sender_id, three.sender_name, three.status, three.superseded_by) == ("", "", "active", "")
    assert four.status == "active"  # unknown status reads as active
    assert three.status == "active"  # missing status too

    assert report.episodes == 4 and report.statuses == {"superseded": 1, "active": 3}
    assert report.as_dict()["scopes"] == [
        {
            "scope_key": "bot-new:group_777",
            "user_key": "bot-new:group_777",
            "bot_uuid": "bot-new",
            "session_name": "group_777",
            "isolation": "session",
            "episodes": 4,
            "profiles": 0,
            "statuses": {"superseded": 1, "active": 3},
            "conflicts": 0,
        }
    ]
    assert report.indexed == 4 and report.not_indexed == 0
    counts = EpisodeCounts.objects.get(user_key=keys.user_key)
    assert (counts.active, counts.superseded, counts.archived) == (3, 1, 0)
    assert Scope.objects.filter(scope_key=keys.scope_key, isolation="session").exists()
    hits = retrieval.recall(keys, "when does the group meet", top_k=1)
    assert hits[0].episode.episode_id == three.episode_id
    assert set(vectors.all_ids(keys.user_key)) == {e.episode_id for e in rows.values()}
    entry = AuditEntry.objects.get(operation="import")
    assert entry.scope_key == keys.scope_key
    assert entry.payload["metadata"]["episodes"] == 4 and entry.payload["metadata"]["format"] == "langbot"
    assert verify_audit_chain().ok


def test_it_imports_langbot_profiles_with_versions(tmp_path, keys, system):
    profiles.update_profile(derive_scope("bot-new", "group_777"), system, "speaker", "u1", name="Before")
    path = _write_json(tmp_path / "profiles.json", langbot_profiles())

    report = imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR)

    target = derive_scope("bot-new", "group_777")
    session, _ = profiles.get_profile(target, "session")
    assert session == {"name": "茶友群", "traits": ["friendly"], "preferences": [], "notes": "tea lovers"}
    speaker_data, speaker = profiles.get_profile(target, "speaker", "u1")
    assert speaker_data["traits"] == ["curious", "kind"] and speaker_data["preferences"] == ["oolong"]
    assert speaker.version == 2 and [v.version for v in speaker.versions.all()] == [2, 1]
    assert speaker.versions.get(version=1).payload["name"] == "Before"
    session_row = Profile.objects.get(type="session")
    assert session_row.updated_at == datetime(2024, 4, 3, tzinfo=UTC) and session_row.version == 1
    assert report.profiles == 2 and report.conflict_count == 1
    assert report.conflicts[0]["kind"] == "profile_exists" and report.conflicts[0]["where"] == "profiles[1]"
    # Each profile written is audited like an edit: what it was and what it became.
    entry = AuditEntry.objects.get(operation="import", target_type="speaker_profile")
    assert entry.target_id == "speaker:u1" and entry.payload["metadata"] == {"version": 2}
    assert entry.payload["before"]["name"] == "Before" and entry.payload["after"]["preferences"] == ["oolong"]
    entry = AuditEntry.objects.get(operation="import", target_type="session_profile")
    assert entry.payload["before"] is None and entry.payload["after"]["notes"] == "tea lovers"
    assert verify_audit_chain().ok


def test_it_uses_the_given_session_name_over_the_files(tmp_path):
    path = _write_json(tmp_path / "episodes.json", langbot_episodes())

    imports.import_file(path, "langbot", bot_uuid="bot-new", session_name="person_5", isolation="bot", actor=ACTOR)

    assert set(Episode.objects.values_list("scope_key", "user_key")) == {("bot-new:person_5", "bot:bot-new")}


# --- atomicity, dry run, conflicts ----------------------------------------------------------------


def test_it_rejects_a_bad_row_in_the_middle_and_writes_nothing(tmp_path):
    data = langbot_episodes()
    # Issue 14: importance 7 is now clamped (tests/memory/test_import_faithful.py); a wrong type still rejects.
    data["episodes"][2]["importance"] = "very"
    path = _write_json(tmp_path / "bad.json", data)

    with pytest.raises(ImportFileError) as caught:
        imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR)

    assert caught.value.message == "episodes[2], field 'importance': must be a whole number from 1 to 5, not 'very'"
    _nothing_written()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda e: e.update(content=""), "episodes[1], field 'content': is missing or empty"),
        (lambda e: e.update(tags=["a,b"]), "episodes[1], field 'tags': a tag may not contain a comma"),
        (lambda e: e.update(timestamp="yesterday"), "episodes[1], field 'timestamp': 'yesterday' is not an ISO-8601"),
        (lambda e: e.update(sender_id={"nested": 1}), "episodes[1], field 'sender_id': must be a string"),
        (lambda e: e.update(content="x" * 9000), "episodes[1], field 'content': is longer than 8000 characters"),
    ],
)
def test_it_names_the_record_and_field_of_a_bad_value(tmp_path, change, message):
    data = langbot_episodes()
    data["episodes"][1].pop("text")
    data["episodes"][1]["content"] = "ok"
    change(data["episodes"][1])
    path = _write_json(tmp_path / "bad.json", data)

    with pytest.raises(ImportFileError) as caught:
        imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR)

    assert caught.value.message.startswith(message)
    _nothing_written()


def test_it_rolls_back_everything_when_a_write_fails_late(tmp_path, monkeypatch):
    data = langbot_episodes()
    data["profiles"] = langbot_profiles()["profiles"]
    path = _write_json(tmp_path / "both.json", data)

    def failing(*args, **kwargs):  # profiles are written after every episode row
        raise RuntimeError("disk full")

    monkeypatch.setattr(profiles, "save_profile", failing)

    with pytest.raises(RuntimeError, match="disk full"):
        imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR)

    _nothing_written()


def test_it_reports_a_dry_run_and_writes_nothing(tmp_path, system):
    target = derive_scope("bot-new", "group_777")
    episodes.remember(target, system, "already here")
    Episode.objects.update(imported_episode_id="ep-three")
    before = (
        Episode.objects.count(),
        AuditEntry.objects.count(),
        Profile.objects.count(),
        vectors.all_ids(target.user_key),
    )
    path = _write_json(tmp_path / "episodes.json", langbot_episodes())

    report = imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR, dry_run=True)

    assert report.dry_run and report.episodes == 3
    assert report.statuses == {"superseded": 1, "active": 2}
    assert report.conflict_count == 1
    assert report.conflicts[0] == {
        "scope_key": "bot-new:group_777",
        "kind": "exists",
        "where": "episodes[2]",
        "id": "ep-three",
        "reason": "already in the target scope; skipped",
    }
    assert report.as_dict()["dry_run"] is True
    assert (
        Episode.objects.count(),
        AuditEntry.objects.count(),
        Profile.objects.count(),
        vectors.all_ids(target.user_key),
    ) == before


def test_it_skips_what_an_earlier_import_brought(tmp_path):
    path = _write_json(tmp_path / "episodes.json", langbot_episodes())
    imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR)

    again = imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR)

    assert again.episodes == 0 and again.conflict_count == 4
    assert Episode.objects.count() == 4


def test_it_refuses_an_actor_limited_to_other_bots(tmp_path):
    path = _write_json(tmp_path / "episodes.json", langbot_episodes())
    with pytest.raises(PermissionDenied):
        imports.import_file(path, "langbot", bot_uuid="bot-new", actor=Actor("token", "t", frozenset({"bot-x"})))
    _nothing_written()


# --- bad files ----------------------------------------------------------------------------------


def test_it_rejects_a_truncated_file_with_its_line(tmp_path):
    text = json.dumps(langbot_episodes(), indent=2)
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2], encoding="utf-8")

    with pytest.raises(ImportFileError, match=r"^line \d+, column \d+: the file is truncated"):
        imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR)
    _nothing_written()


def test_it_rejects_malformed_json_with_its_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{\n  "version": 1,\n  "episodes": [\n    {"content": "a",, }\n  ]\n}', encoding="utf-8")

    with pytest.raises(ImportFileError, match=r"^line 4, column \d+: the file is not valid JSON"):
        imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR)


def test_it_rejects_an_oversized_file_before_reading_it(tmp_path, settings):
    settings.MEMCONSOLE_IMPORT_MAX_BYTES = 1024
    data = langbot_episodes()
    data["episodes"] = data["episodes"] * 20
    path = _write_json(tmp_path / "big.json", data)

    with pytest.raises(ImportFileError, match="the limit is 1,024"):
        imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR)
    _nothing_written()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"version": 1, "episodes": [{"content": "a", "importance": NaN}]}', "not allowed"),
        ('{"version": 1, "episodes": [{"content": "a", "importance": ' + "9" * 5000 + "}]}", "too many digits$"),
        ('{"version": 1, "episodes": [], "x": "' + "[{" * 1000 + '"}', None),  # brackets inside strings are fine
    ],
)
def test_it_rejects_json_bombs(tmp_path, text, message):
    path = tmp_path / "bomb.json"
    path.write_text(text, encoding="utf-8")
    if message is None:
        report = imports.import_file(path, "langbot", bot_uuid="bot-new", session_name="s", actor=ACTOR, dry_run=True)
        assert report.episodes == 0
        return
    with pytest.raises(ImportFileError, match=message):
        imports.import_file(path, "langbot", bot_uuid="bot-new", session_name="s", actor=ACTOR)
    _nothing_written()


def test_it_rejects_the_wrong_format_saying_which_to_use(tmp_path, scope_with_episodes, keys, system):
    export = tmp_path / "export.json"
    export.write_text("".join(exports.stream_scope_export(keys, system)), encoding="utf-8")
    langbot = _write_json(tmp_path / "langbot.json", langbot_episodes())
    database = tmp_path / "memory.db"
    sqlite3.connect(database).execute("CREATE TABLE other (x)").connection.commit()
    not_json = tmp_path / "notes.txt"
    not_json.write_bytes("\xff\xfe not utf-8".encode("latin-1"))

    cases = [
        (export, "langbot", "this is a memconsole export (use the memconsole format)"),
        (langbot, "memconsole", "this looks like a LangBot export"),
        (database, "langbot", "this is a SQLite database"),
        (langbot, "jw-agents", "not a jw-agents memory.db: the file is not a SQLite database"),
        (database, "jw-agents", "not a jw-agents memory.db: there is no 'records' table"),
        (database, "bot-memory", "not a bot-memory memory.db: there is no 'facts' table"),
        (not_json, "langbot", "line 1: the file is not UTF-8 text"),
    ]
    for path, fmt, message in cases:
        with pytest.raises(ImportFileError) as caught:
            imports.import_file(path, fmt, bot_uuid="bot-new", session_name="s", actor=ACTOR)
        assert message in caught.value.message, (fmt, caught.value.message)
    assert Episode.objects.count() == 4


def test_it_rejects_a_damaged_sqlite_file(tmp_path):
    path = _jw_database(tmp_path, rows=[(1, "s1", "2024-01-01T00:00:00Z", "fact_recalled", b"x" * 5000, "{}", 0)] * 1)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])

    with pytest.raises(ImportFileError, match="damaged or truncated"):
        imports.import_file(path, "jw-agents", bot_uuid="bot-new", isolation="session", actor=ACTOR)
    _nothing_written()


# --- jw-agents ----------------------------------------------------------------------------------


def _jw_database(tmp_path: Path, rows: list[tuple]) -> Path:
    path = tmp_path / "memory.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE records (id INTEGER PRIMARY KEY, session_id TEXT, timestamp TEXT, kind TEXT, "
            "content BLOB, metadata TEXT, encrypted INTEGER)"
        )
        db.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    return path


def _jw_rows(key: bytes) -> list[tuple]:
    fernet = Fernet(key)
    return [
        (
            1,
            "chat-a",
            "2024-03-01T10:00:00+00:00",
            "question",
            b"What is the Wi-Fi password?",
            '{"sender_id": "u1"}',
            0,
        ),
        (2, "chat-a", "2024-03-01T10:00:05Z", "answer", fernet.encrypt("密码是 tea-time-42".encode()), None, 1),
        (
            3,
            "chat-b",
            "2024-03-02T08:00:00",
            "preference",
            fernet.encrypt(b"Prefers replies in English"),
            '{"importance": "4", "sender_name": "Bob"}',
            1,
        ),
        (4, "chat-b", "2024-03-03T08:00:00Z", "objection", "不同意周末开会", "{}", 0),
        (5, "chat-a", None, "fact_recalled", b"The office is on floor 3", '{"status": "mystery"}', 0),
    ]


def test_it_imports_jw_agents_records_with_encrypted_rows(tmp_path):
    key = Fernet.generate_key()
    path = _jw_database(tmp_path, _jw_rows(key))

    report = imports.import_file(
        path, "jw-agents", bot_uuid="bot-jw", isolation="session", actor=ACTOR, fernet_key=key.decode()
    )

    rows = {e.imported_episode_id: e for e in Episode.objects.all()}
    assert set(rows) == {"1", "2", "3", "4", "5"}
    assert rows["1"].scope_key == "bot-jw:chat-a" and rows["3"].scope_key == "bot-jw:chat-b"
    assert (
        rows["1"].content == "What is the Wi-Fi password?"
        and rows["1"].tags == ["question"]
        and rows["1"].sender_id == "u1"
    )
    assert rows["2"].content == "密码是 tea-time-42" and rows["2"].tags == ["answer"]
    assert rows["2"].timestamp == datetime(2024, 3, 1, 10, 0, 5, tzinfo=UTC)
    assert (
        rows["3"].content == "Prefers replies in English"
        and rows["3"].importance == 4
        and rows["3"].sender_name == "Bob"
    )
    assert rows["3"].timestamp == datetime(2024, 3, 2, 8, tzinfo=UTC)  # naive times read as UTC
    assert rows["4"].content == "不同意周末开会" and rows["4"].tags == ["objection"]
    assert rows["5"].timestamp is None and rows["5"].status == "active" and rows["5"].tags == ["fact_recalled"]
    assert {e.source for e in rows.values()} == {"import"}
    assert sorted(s["scope_key"] for s in report.as_dict()["scopes"]) == ["bot-jw:chat-a", "bot-jw:chat-b"]
    assert report.scopes["bot-jw:chat-a"]["episodes"] == 3
    assert AuditEntry.objects.filter(operation="import").count() == 2
    chat_a = derive_scope("bot-jw", "chat-a")
    assert set(vectors.all_ids(chat_a.user_key)) == {rows[n].episode_id for n in ("1", "2", "5")}


def test_it_reads_the_jw_key_from_the_environment(tmp_path, monkeypatch):
    key = Fernet.generate_key()
    monkeypatch.setenv("JW_MEMORY_KEY", key.decode())
    path = _jw_database(tmp_path, _jw_rows(key))

    report = imports.import_file(path, "jw-agents", bot_uuid="bot-jw", isolation="bot", actor=ACTOR)

    assert report.episodes == 5
    assert set(Episode.objects.values_list("user_key", flat=True)) == {"bot:bot-jw"}


def test_it_refuses_encrypted_jw_rows_without_or_with_a_wrong_key(tmp_path, monkeypatch):
    monkeypatch.delenv("JW_MEMORY_KEY", raising=False)
    path = _jw_database(tmp_path, _jw_rows(Fernet.generate_key()))

    with pytest.raises(ImportFileError, match=r"records id=2 is encrypted: give the Fernet key"):
        imports.import_file(path, "jw-agents", bot_uuid="bot-jw", actor=ACTOR)
    with pytest.raises(ImportFileError, match=r"records id=2, field 'content': cannot be decrypted"):
        imports.import_file(
            path, "jw-agents", bot_uuid="bot-jw", actor=ACTOR, fernet_key=Fernet.generate_key().decode()
        )
    with pytest.raises(ImportFileError, match="not valid"):
        imports.import_file(path, "jw-agents", bot_uuid="bot-jw", actor=ACTOR, fernet_key="short")
    _nothing_written()


# --- bot-memory ---------------------------------------------------------------------------------


def _bot_memory_database(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE facts (agent_id TEXT, subject TEXT, key TEXT, value TEXT, updated_at TEXT)")
        db.execute("CREATE TABLE messages (agent_id TEXT, room_id TEXT, role TEXT, content TEXT, created_at TEXT)")
        db.executemany(
            "INSERT INTO facts VALUES (?, ?, ?, ?, ?)",
            [
                ("agent-1", "@alice:example.org", "favourite_drink", "oolong tea", "2024-02-01T12:00:00Z"),
                ("agent-1", "@bob:example.org", "城市", "上海", "2024-02-02T12:00:00Z"),
                ("agent-2", "@carol:example.org", "pet", "a cat", "2024-02-03T12:00:00Z"),
            ],
        )
        db.executemany(
            "INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
            [
                ("agent-1", "!room1:example.org", "user", "hello there", "2024-02-01T11:59:00Z"),
                ("agent-1", "!room2:example.org", "assistant", "你好！", "2024-02-01T12:01:00Z"),
                ("agent-2", "!room1:example.org", "user", "not this agent", "2024-02-01T12:02:00Z"),
            ],
        )
    return path


def test_it_imports_bot_memory_facts_of_one_agent(tmp_path):
    path = _bot_memory_database(tmp_path)

    report = imports.import_file(
        path, "bot-memory", bot_uuid="agent-1", session_name="group_9", isolation="session", actor=ACTOR
    )

    # Issue 20: the facts table maps to keyed facts, not to episodes.
    rows = sorted(Fact.objects.all(), key=lambda f: f.subject)
    assert [(f.subject, f.key, f.text) for f in rows] == [
        ("@alice:example.org", "favourite_drink", "oolong tea"),
        ("@bob:example.org", "城市", "上海"),
    ]
    assert rows[0].updated_at == datetime(2024, 2, 1, 12, tzinfo=UTC)
    assert {f.user_key for f in rows} == {"agent-1:group_9"} and {f.bot_uuid for f in rows} == {"agent-1"}
    assert report.facts == 2 and report.episodes == 0 and not Episode.objects.exists()
    assert "2 keyed facts and 0 window messages" in report.summary()  # said, not "0 episodes" alone


def test_it_imports_bot_memory_messages_into_their_rooms(tmp_path, settings):
    settings.MEMCONSOLE_WINDOW_RETENTION_DAYS = 0  # the file's messages are from 2024: keep them
    path = _bot_memory_database(tmp_path)

    imports.import_file(
        path,
        "bot-memory",
        bot_uuid="agent-1",
        session_name="group_9",
        isolation="bot",
        actor=ACTOR,
        include_messages=True,
    )

    # Issue 20: the messages table maps to the conversation window of each room.
    messages = {m.text: m for m in WindowMessage.objects.all()}
    assert set(messages) == {"hello there", "你好！"}
    assert messages["hello there"].scope_key == "agent-1:!room1:example.org" and messages["hello there"].role == "user"
    assert messages["你好！"].role == "assistant"
    assert set(Fact.objects.values_list("user_key", flat=True)) == {"bot:agent-1"}  # bot isolation shares one space
    assert Fact.objects.count() == 2 and not Episode.objects.exists()


def test_it_names_the_agents_when_the_bot_has_nothing_in_the_file(tmp_path):
    path = _bot_memory_database(tmp_path)
    with pytest.raises(
        ImportFileError, match=r"no facts for agent 'agent-9' in this file \(agents found: agent-1, agent-2\)"
    ):
        imports.import_file(path, "bot-memory", bot_uuid="agent-9", session_name="g", actor=ACTOR)
    with pytest.raises(ImportFileError, match="give the target session name"):
        imports.import_file(path, "bot-memory", bot_uuid="agent-1", actor=ACTOR)
    _nothing_written()


# --- memconsole round trip ----------------------------------------------------------------------


def _comparable(doc: dict) -> tuple[list, list]:
    episodes = [
        {
            k: v
            for k, v in e.items()
            # original_source (issue 14) is provenance like source: the copy's says where it came from.
            if k not in ("id", "imported_episode_id", "source", "original_source", "superseded_by")
        }
        for e in doc["episodes"]["episodes"]
    ]
    profiles = [{k: v for k, v in p.items() if k not in ("scope_key", "version")} for p in doc["profiles"]["profiles"]]
    return episodes, profiles


def test_it_round_trips_a_memconsole_export(tmp_path, scope_with_episodes, keys, system):
    profiles.update_profile(keys, system, "session", name="Travel club", add_traits=["friendly"], notes="多语言群")
    profiles.update_profile(keys, system, "speaker", "u2", name="Bob", add_preferences=["dumplings"])
    correction = episodes.remember(
        keys, system, "Correction: the trip to Beijing is in June", tags=["correction"], sender_id="u1"
    )
    # Make the supersede link certain whatever the model's similarity says.
    Episode.objects.filter(pk=scope_with_episodes[0].pk).update(
        status="superseded", superseded_by=correction.episode.episode_id
    )
    first = json.loads("".join(exports.stream_scope_export(keys, system, include_audit=True)))
    assert first["audit"]["count"] > 0  # another installation's audit log is not imported
    path = tmp_path / "export.json"
    path.write_text(json.dumps(first, ensure_ascii=False), encoding="utf-8")

    report = imports.import_file(
        path, "memconsole", bot_uuid="bot-z", session_name="group_copy", isolation="session", actor=ACTOR
    )
    target = derive_scope("bot-z", "group_copy", "session")
    second = json.loads("".join(exports.stream_scope_export(target, system)))

    assert report.episodes == 5 and report.profiles == 2
    assert _comparable(second) == _comparable(first)
    assert [e["imported_episode_id"] for e in second["episodes"]["episodes"]] == [
        e["id"] for e in first["episodes"]["episodes"]
    ]
    new_ids = {e["imported_episode_id"]: e["id"] for e in second["episodes"]["episodes"]}
    copy = next(
        e for e in second["episodes"]["episodes"] if e["imported_episode_id"] == scope_with_episodes[0].episode_id
    )
    assert copy["status"] == "superseded" and copy["superseded_by"] == new_ids[correction.episode.episode_id]
    assert all(e["id"] not in new_ids for e in second["episodes"]["episodes"])
    assert second["scope"]["scope_key"] == "bot-z:group_copy"
    assert (
        not AuditEntry.objects.filter(scope_key="bot-z:group_copy").exclude(operation__in=["import", "export"]).exists()
    )


def test_it_imports_an_upload_without_using_its_name_as_a_path(tmp_path, settings):
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    upload = SimpleUploadedFile(
        "../../etc/passwd\x00;<b>.json", json.dumps(langbot_episodes()).encode(), "application/json"
    )

    report = imports.import_upload(upload, "langbot", bot_uuid="bot-up", actor=ACTOR)

    assert report.episodes == 4
    assert report.file_name == "passwd_b_.json"
    assert not (tmp_path / "passwd").exists()
    assert AuditEntry.objects.get(operation="import").payload["metadata"]["file_name"] == "passwd_b_.json"


def test_it_refuses_an_upload_over_the_limit(settings):
    settings.MEMCONSOLE_IMPORT_MAX_BYTES = 1024
    upload = SimpleUploadedFile("big.json", b"{" + b" " * 5000 + b"}")
    with pytest.raises(ImportFileError, match="limit"):
        imports.import_upload(upload, "langbot", bot_uuid="bot-up", actor=ACTOR)


# --- command line -------------------------------------------------------------------------------


def test_it_imports_from_the_command_line_with_progress(tmp_path, capsys):
    path = _write_json(tmp_path / "episodes.json", langbot_episodes())

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
    out = capsys.readouterr()
    assert "would import 4 episodes and 0 profiles into 1 scope(s) (active 3, superseded 1), 0 conflict(s)" in out.out
    assert not Episode.objects.exists()

    call_command("import_memory", str(path), "--format", "langbot", "--bot-uuid", "bot-cli", "--isolation", "session")
    out = capsys.readouterr()
    assert "imported 4 episodes" in out.out and "bot-cli:group_777 (session): 4 episodes" in out.out
    assert "indexing: 4/4" in out.err
    assert Episode.objects.count() == 4


def test_it_fails_on_the_command_line_with_the_place(tmp_path):
    data = langbot_episodes()
    data["episodes"][3]["tags"] = 5
    path = _write_json(tmp_path / "bad.json", data)

    with pytest.raises(CommandError, match=r"episodes\[3\], field 'tags'.*nothing was imported"):
        call_command(
            "import_memory", str(path), "--format", "langbot", "--bot-uuid", "bot-cli", "--isolation", "session"
        )
    _nothing_written()


def test_it_seals_imported_content_when_encryption_is_on(tmp_path, settings):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    data = langbot_episodes()
    data["profiles"] = langbot_profiles()["profiles"]
    path = _write_json(tmp_path / "both.json", data)

    imports.import_file(path, "langbot", bot_uuid="bot-sealed", actor=ACTOR)

    row = Episode.objects.get(imported_episode_id="ep-two")
    assert row.encrypted and "乌龙茶" not in row.content_stored and row.content == "爱丽丝其实更喜欢乌龙茶"
    profile = Profile.objects.get(type="speaker")
    assert profile.encrypted and "oolong" not in profile.payload_stored and profile.payload["preferences"] == ["oolong"]


def test_it_imports_an_uploaded_sqlite_file_and_leaves_no_temporary_files(tmp_path, monkeypatch):
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp_root))
    key = Fernet.generate_key()
    path = _jw_database(tmp_path, _jw_rows(key))
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")  # SQLite then makes -wal/-shm files beside the copy it reads
    upload = SimpleUploadedFile("memory.db", path.read_bytes(), "application/octet-stream")

    report = imports.import_upload(upload, "jw-agents", bot_uuid="bot-jw", actor=ACTOR, fernet_key=key.decode())

    assert report.episodes == 5 and report.file_name == "memory.db"
    assert list(temp_root.iterdir()) == []


# --- values that used to get past the checks (review) -------------------------------------------


@pytest.mark.parametrize("importance", ["²", "9" * 5000])
def test_it_rejects_an_importance_that_is_not_a_plain_number(tmp_path, importance):
    data = langbot_episodes()
    data["episodes"][1]["importance"] = importance
    path = _write_json(tmp_path / "bad.json", data)

    with pytest.raises(ImportFileError) as caught:
        imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR, dry_run=True)

    assert caught.value.field == "importance"
    assert caught.value.message.startswith("episodes[1], field 'importance': must be a whole number from 1 to 5")
    _nothing_written()


@pytest.mark.parametrize("stamp", ["9999-12-31T23:00:00-05:00", "0001-01-01T00:10:00+01:00"])
def test_it_rejects_a_time_out_of_range_in_utc_already_in_the_dry_run(tmp_path, stamp):
    data = langbot_episodes()
    data["episodes"][2]["timestamp"] = stamp
    path = _write_json(tmp_path / "bad.json", data)

    for dry_run in (True, False):
        with pytest.raises(ImportFileError) as caught:
            imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR, dry_run=dry_run)
        assert caught.value.field == "timestamp"
        assert caught.value.message.startswith("episodes[2], field 'timestamp':")
    _nothing_written()


@pytest.mark.parametrize("name", ["id", "superseded_by"])
def test_it_rejects_an_old_id_holding_a_nul(tmp_path, name):
    data = langbot_episodes()
    data["episodes"][2][name] = "ep\x00three"
    path = _write_json(tmp_path / "bad.json", data)

    with pytest.raises(ImportFileError) as caught:
        imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR, dry_run=True)

    assert caught.value.message == "episodes[2], field 'id': contains a NUL character"
    _nothing_written()


def test_it_imports_beside_a_remember_holding_the_audit_chain_without_a_deadlock(postgresql, tmp_path):
    target = derive_scope("bot-new", "group_777")
    episodes.remember(target, ACTOR, "already here")
    writer, outcome = remember_holding_the_chain(target, ACTOR)
    path = _write_json(tmp_path / "episodes.json", langbot_episodes())

    report = imports.import_file(path, "langbot", bot_uuid="bot-new", actor=ACTOR)
    writer.join(30)

    assert "error" not in outcome, outcome.get("error")
    assert report.episodes == 4
    counts = EpisodeCounts.objects.get(user_key=target.user_key)
    assert (counts.active, counts.superseded, counts.archived) == (4, 1, 0)
    assert verify_audit_chain().ok
