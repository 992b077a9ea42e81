"""Importing a chat's window, keyed facts and profiles says what it wrote, and writes only what a
live write would (docs/design.md §7): no message dated in the future, none the window would drop
at once, no fact forgotten here, no erased person's message, no profile version that changes nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from memconsole.memory import erasure, exports, facts, imports, profiles, window
from memconsole.memory.botmemory_models import Fact, WindowMessage
from memconsole.memory.models import AuditEntry, Profile, ProfileVersion
from memconsole.memory.scopes import derive_scope

pytestmark = pytest.mark.django_db


def _document(messages=(), fact_records=()):
    return {
        "format": exports.FORMAT_MARKER,
        "format_version": 1,
        "scope": {"scope_key": "botA:chat_1", "session_name": "chat_1"},
        "facts": list(fact_records),
        "messages": list(messages),
    }


def _write(tmp_path, document, name="export.json"):
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _import(path, keys, system, **options):
    return imports.import_file(
        path, "memconsole", bot_uuid=keys.bot_uuid, session_name=keys.session_name, actor=system, **options
    )


def _message(minutes_ago, content, **extra):
    when = timezone.now() - timedelta(minutes=minutes_ago)
    return {"role": "user", "content": content, "created_at": when.isoformat(), **extra}


def _scope_entry(keys):
    return AuditEntry.objects.filter(operation="import", target_type="scope", scope_key=keys.scope_key).latest("id")


def _kinds(report):
    return {(item["where"], item["kind"]) for item in report.conflicts}


# --- 1. a message dated in the future --------------------------------------------------------------


def test_it_does_not_store_a_window_message_dated_in_the_future(tmp_path, keys, system):
    future = (timezone.now() + timedelta(days=2)).isoformat()
    document = _document([_message(5, "hello"), {"role": "user", "content": "from tomorrow", "created_at": future}])
    path = _write(tmp_path, document)

    preview = _import(path, keys, system, dry_run=True)
    report = _import(path, keys, system)

    for answer in (preview, report):
        assert answer.messages == 1
        assert _kinds(answer) == {("messages[1]", "future")}, answer.conflicts
    assert [message.text for message in WindowMessage.objects.all()] == ["hello"]
    assert [m.content for m in window.recent_messages(keys)] == ["hello"]


def test_it_keeps_a_message_within_the_clock_skew(tmp_path, keys, system):
    soon = (timezone.now() + timedelta(minutes=1)).isoformat()
    path = _write(tmp_path, _document([{"role": "user", "content": "a fast clock", "created_at": soon}]))

    assert _import(path, keys, system).messages == 1
    assert WindowMessage.objects.count() == 1


# --- 2. what the window keeps is what is counted ------------------------------------------------


def test_it_counts_only_the_messages_the_window_keeps(tmp_path, keys, system, settings):
    settings.MEMCONSOLE_WINDOW_RETENTION_DAYS = 30
    messages = [_message(60 - minute, f"message {minute}") for minute in range(30)]  # oldest first
    messages.append(_message(60 * 24 * 31, "past retention"))
    path = _write(tmp_path, _document(messages))

    preview = _import(path, keys, system, dry_run=True)
    report = _import(path, keys, system)

    assert WindowMessage.objects.count() == 20  # the default window size
    kept = [message.content for message in window.recent_messages(keys)]
    assert kept == [f"message {minute}" for minute in range(10, 30)]
    for answer in (preview, report):
        assert answer.messages == 20, answer.summary()
        expected = {(f"messages[{minute}]", "window_full") for minute in range(10)} | {
            ("messages[30]", "past_retention")
        }
        assert _kinds(answer) == expected
        assert answer.conflict_count == 11
    assert "20 window messages" in report.summary()
    assert _scope_entry(keys).payload["metadata"]["messages"] == 20


def test_it_counts_a_message_that_pushes_out_an_older_one_of_the_chat(tmp_path, keys, system, settings):
    settings.MEMCONSOLE_WINDOW_RETENTION_DAYS = 30
    window.set_window_size(system, keys.bot_uuid, 2)
    window.append_message(keys, system, "user", "old", created_at=timezone.now() - timedelta(minutes=30))
    window.append_message(keys, system, "user", "newest here", created_at=timezone.now() - timedelta(minutes=1))
    path = _write(tmp_path, _document([_message(40, "older than both"), _message(10, "between")]))

    report = _import(path, keys, system)

    assert report.messages == 1 and _kinds(report) == {("messages[0]", "window_full")}
    assert [m.content for m in window.recent_messages(keys)] == ["between", "newest here"]


def test_a_second_import_of_the_same_export_counts_nothing_written(tmp_path, keys, system):
    facts.remember_fact(keys, system, "u1", "city", "Lyon")
    window.append_message(keys, system, "user", "hello", sender_id="u1")
    path = tmp_path / "export.json"
    path.write_text("".join(exports.stream_scope_export(keys, system)), encoding="utf-8")

    out = StringIO()
    call_command(
        "import_memory",
        str(path),
        "--format",
        "memconsole",
        "--bot-uuid",
        keys.bot_uuid,
        "--isolation",
        "session",
        "--session-name",
        keys.session_name,
        stdout=out,
        stderr=StringIO(),
    )

    summary = out.getvalue().strip().splitlines()[-1]
    assert "keyed facts" not in summary and "window messages" not in summary, summary
    metadata = _scope_entry(keys).payload["metadata"]
    assert (metadata["facts"], metadata["messages"]) == (0, 0)
    assert Fact.objects.count() == 1 and WindowMessage.objects.count() == 1


def test_it_counts_a_changed_fact_and_not_an_unchanged_one(tmp_path, keys, system):
    facts.remember_fact(keys, system, "u1", "city", "Lyon")
    facts.remember_fact(keys, system, "u1", "drink", "tea")
    later = (timezone.now() + timedelta(seconds=1)).isoformat()
    records = [
        {"subject": "u1", "key": "city", "value": "Lyon", "updated_at": later},
        {"subject": "u1", "key": "drink", "value": "coffee", "updated_at": later},
    ]
    path = _write(tmp_path, _document(fact_records=records))

    assert _import(path, keys, system, dry_run=True).facts == 1
    report = _import(path, keys, system)

    assert report.facts == 1 and _scope_entry(keys).payload["metadata"]["facts"] == 1
    assert [f.value for f in facts.recall_facts(keys, "u1")] == ["Lyon", "coffee"]


# --- 3. an erased person's window messages ------------------------------------------------------


@pytest.mark.parametrize("dry_run", [True, False])
def test_it_lists_an_erased_persons_window_messages_as_conflicts(tmp_path, keys, system, dry_run):
    window.append_message(keys, system, "user", "I am Ann", sender_id="u-ann", sender_name="Ann")
    window.append_message(keys, system, "user", "I am Bob", sender_id="u-bob", sender_name="Bob")
    path = tmp_path / "before.json"
    path.write_text("".join(exports.stream_scope_export(keys, system)), encoding="utf-8")
    erasure.erase_subject("u-ann", bot_uuid=keys.bot_uuid, actor=system)
    WindowMessage.objects.all().delete()

    report = _import(path, keys, system, dry_run=dry_run)

    assert _kinds(report) == {("messages[0]", "erased")}, report.conflicts
    assert report.messages == 1
    expected = [] if dry_run else ["I am Bob"]
    assert [m.text for m in WindowMessage.objects.all()] == expected


# --- 4. a fact forgotten here -----------------------------------------------------------------


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_forgotten_fact_does_not_come_back_from_an_old_export(tmp_path, keys, system, dry_run):
    facts.remember_fact(keys, system, "u1", "city", "Lyon")
    facts.remember_fact(keys, system, "u1", "drink", "tea")
    path = tmp_path / "before.json"
    path.write_text("".join(exports.stream_scope_export(keys, system)), encoding="utf-8")
    facts.forget_fact(keys, system, "u1", "city")

    report = _import(path, keys, system, dry_run=dry_run)

    assert _kinds(report) == {("facts[0]", "deleted_here")}, report.conflicts
    assert report.conflicts[0]["id"] == "city"
    assert report.facts == 0  # the drink is there already
    assert [(f.key, f.value) for f in facts.recall_facts(keys, "u1")] == [("drink", "tea")]


def test_a_fact_set_again_after_the_forget_is_imported(tmp_path, keys, system):
    facts.remember_fact(keys, system, "u1", "city", "Lyon")
    facts.forget_fact(keys, system, "u1", "city")
    later = (timezone.now() + timedelta(seconds=1)).isoformat()
    path = _write(
        tmp_path, _document(fact_records=[{"subject": "u1", "key": "city", "value": "Rome", "updated_at": later}])
    )

    report = _import(path, keys, system)

    assert report.facts == 1 and not report.conflicts
    assert [(f.key, f.value) for f in facts.recall_facts(keys, "u1")] == [("city", "Rome")]


def test_a_fact_forgotten_in_another_space_is_imported(tmp_path, keys, system):
    other = derive_scope(keys.bot_uuid, "group_200", "session")
    facts.remember_fact(other, system, "u1", "city", "Lyon")
    facts.forget_fact(other, system, "u1", "city")
    path = _write(tmp_path, _document(fact_records=[{"subject": "u1", "key": "city", "value": "Lyon"}]))

    assert _import(path, keys, system).facts == 1


# --- 5. an unchanged profile -------------------------------------------------------------------


def test_an_unchanged_profile_keeps_its_version_and_writes_no_audit_entry(tmp_path, keys, system):
    profiles.change_profile(keys, system, "speaker", "u1", name="Ann", add_traits=["night owl"])
    profiles.change_profile(keys, system, "session", name="Book club")
    path = tmp_path / "export.json"
    path.write_text("".join(exports.stream_scope_export(keys, system)), encoding="utf-8")
    entries = AuditEntry.objects.filter(target_type__endswith="_profile").count()

    preview = _import(path, keys, system, dry_run=True)
    report = _import(path, keys, system)
    again = _import(path, keys, system)

    assert {row.version for row in Profile.objects.all()} == {1}
    assert ProfileVersion.objects.count() == 2
    assert AuditEntry.objects.filter(target_type__endswith="_profile").count() == entries
    for answer in (preview, report, again):
        assert answer.profiles == 0
        assert {item["kind"] for item in answer.conflicts} == {"exists"}
    assert _scope_entry(keys).payload["metadata"]["profiles"] == 0


def test_an_older_export_does_not_roll_back_a_profile_changed_since(tmp_path, keys, system):
    """Found by a user: importing last week's export again put back the traits changed since."""
    profiles.change_profile(keys, system, "speaker", "u1", name="Ann", add_traits=["night owl"])
    path = tmp_path / "export.json"
    path.write_text("".join(exports.stream_scope_export(keys, system)), encoding="utf-8")
    profiles.change_profile(keys, system, "speaker", "u1", add_traits=["early bird"], remove_traits=["night owl"])

    report = _import(path, keys, system)

    row = Profile.objects.get(type="speaker")
    assert row.version == 2 and row.payload["traits"] == ["early bird"]
    assert report.profiles == 0 and {item["kind"] for item in report.conflicts} == {"newer_here"}


def test_a_profile_newer_in_the_file_becomes_a_new_version(tmp_path, keys, system):
    profiles.change_profile(keys, system, "speaker", "u1", name="Ann", add_traits=["night owl"])
    document = json.loads("".join(exports.stream_scope_export(keys, system)))
    [speaker] = [p["profile"] for p in document["profiles"]["profiles"] if p["type"] == "speaker"]
    speaker["traits"], speaker["updated_at"] = ["early bird"], (timezone.now() + timedelta(seconds=1)).isoformat()
    path = _write(tmp_path, document)

    report = _import(path, keys, system)

    row = Profile.objects.get(type="speaker")
    assert row.version == 2 and row.payload["traits"] == ["early bird"]
    assert report.profiles == 1 and {item["kind"] for item in report.conflicts} == {"profile_exists"}


def test_an_older_export_does_not_roll_back_a_fact_changed_since(tmp_path, keys, system):
    """Found by a user: the bot was told "city: Rome" again after it had learnt Milan."""
    facts.remember_fact(keys, system, "u1", "city", "Rome")
    path = tmp_path / "before.json"
    path.write_text("".join(exports.stream_scope_export(keys, system)), encoding="utf-8")
    facts.remember_fact(keys, system, "u1", "city", "Milan")

    report = _import(path, keys, system)

    assert [(f.key, f.value) for f in facts.recall_facts(keys, "u1")] == [("city", "Milan")]
    assert report.facts == 0 and _kinds(report) == {("facts[0]", "newer_here")}


class _Checkpoint:
    """A background job's checkpoint (`writer.Checkpoint`), kept in memory."""

    def __init__(self):
        self.state = {}

    def save(self, state):
        self.state = dict(state)


def test_a_batched_import_counts_and_stores_what_it_wrote(tmp_path, keys, system, settings):
    settings.MEMCONSOLE_WINDOW_RETENTION_DAYS = 30
    window.set_window_size(system, keys.bot_uuid, 3)
    future = (timezone.now() + timedelta(days=1)).isoformat()
    messages = [_message(10 - minute, f"message {minute}") for minute in range(5)]
    messages.append({"role": "user", "content": "from tomorrow", "created_at": future})
    path = _write(tmp_path, _document(messages))
    checkpoint = _Checkpoint()

    report = _import(path, keys, system, checkpoint=checkpoint)

    assert report.messages == 3 and checkpoint.state["report"]["messages"] == 3
    assert _kinds(report) == {("messages[0]", "window_full"), ("messages[1]", "window_full"), ("messages[5]", "future")}
    assert _scope_entry(keys).payload["metadata"]["messages"] == 3
    assert [m.content for m in window.recent_messages(keys)] == ["message 2", "message 3", "message 4"]


def test_it_refuses_a_format_version_of_true(tmp_path, keys, system):
    # accepted as version 1 (True == 1 in Python)
    path = _write(tmp_path, {**_document(), "format_version": True})
    with pytest.raises(imports.ImportFileError, match="format_version True is not understood"):
        _import(path, keys, system)
    assert not AuditEntry.objects.filter(operation="import").exists()
