"""Issue 20: keyed facts and the conversation window through export, import, erasure and key rotation."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError

from memconsole.memory import exports, facts, imports, window
from memconsole.memory.audit import Actor
from memconsole.memory.botmemory_models import Fact, FactVersion, WindowMessage
from memconsole.memory.erasure import erase_subject
from memconsole.memory.models import AuditEntry
from memconsole.memory.rotation import rotate_keys

pytestmark = pytest.mark.django_db

ACTOR = Actor.system("tests")


def test_it_exports_and_imports_facts_and_the_window(tmp_path, keys, system):
    facts.remember_fact(keys, system, "u1", "city", "Paris")
    facts.remember_fact(keys, system, "u1", "city", "Berlin")
    window.append_message(keys, system, "user", "hello", sender_id="u1", sender_name="Alice")
    window.append_message(keys, system, "assistant", "hi Alice")
    document = json.loads("".join(exports.stream_scope_export(keys, system)))
    assert [(f["subject"], f["key"], f["value"]) for f in document["facts"]] == [("u1", "city", "Berlin")]
    assert [(m["role"], m["content"]) for m in document["messages"]] == [("user", "hello"), ("assistant", "hi Alice")]

    path = tmp_path / "export.json"
    path.write_text(json.dumps(document))
    dry = imports.import_file(path, "memconsole", bot_uuid="bot-new", actor=ACTOR, dry_run=True)
    assert (dry.facts, dry.messages) == (1, 2) and not Fact.objects.filter(bot_uuid="bot-new").exists()
    report = imports.import_file(path, "memconsole", bot_uuid="bot-new", actor=ACTOR)
    assert (report.facts, report.messages) == (1, 2)
    copied = Fact.objects.get(bot_uuid="bot-new")
    assert (copied.subject, copied.key, copied.text) == ("u1", "city", "Berlin")
    chat = WindowMessage.objects.filter(bot_uuid="bot-new").order_by("created_at")
    assert [(m.role, m.text, m.sender_name) for m in chat] == [
        ("user", "hello", "Alice"),
        ("assistant", "hi Alice", ""),
    ]
    imports.import_file(path, "memconsole", bot_uuid="bot-new", actor=ACTOR)  # again: nothing twice
    assert Fact.objects.filter(bot_uuid="bot-new").count() == 1 and chat.count() == 2


def test_a_bad_fact_in_a_file_writes_nothing(tmp_path, keys, system):
    window.append_message(keys, system, "user", "hello")
    document = json.loads("".join(exports.stream_scope_export(keys, system)))
    document["facts"] = [{"subject": "u1", "key": "", "value": "x"}]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(document))
    with pytest.raises(imports.ImportFileError, match="key"):
        imports.import_file(path, "memconsole", bot_uuid="bot-new", actor=ACTOR)
    assert not WindowMessage.objects.filter(bot_uuid="bot-new").exists()


def test_erasure_removes_a_persons_facts_and_messages(keys, other_keys, system):
    facts.remember_fact(keys, system, "alice", "card", "1234")
    facts.remember_fact(keys, system, "alice", "card", "5678")
    facts.remember_fact(keys, system, "bob", "city", "Oslo")
    facts.remember_fact(other_keys, system, "alice", "pet", "cat")  # another bot
    window.append_message(keys, system, "user", "my card is 5678", sender_id="alice")
    window.append_message(keys, system, "user", "hello", sender_id="bob")

    dry = erase_subject("alice", bot_uuid="bot-a", actor=ACTOR, dry_run=True)
    assert (dry.facts, dry.messages) == (1, 1) and Fact.objects.count() == 3
    report = erase_subject("alice", bot_uuid="bot-a", actor=ACTOR)
    assert (report.facts, report.messages) == (1, 1)
    assert sorted(Fact.objects.values_list("subject", "bot_uuid")) == [("alice", "bot-b"), ("bob", "bot-a")]
    assert not FactVersion.objects.filter(fact__subject="alice", fact__bot_uuid="bot-a").exists()
    assert list(WindowMessage.objects.values_list("sender_id", flat=True)) == ["bob"]
    for entry in AuditEntry.objects.filter(operation="fact_remember", user_key=keys.user_key):
        assert "5678" not in json.dumps(entry.payload)  # the fact's audit entries are redacted


def test_key_rotation_reencrypts_facts_and_messages(keys, system, settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.MEMCONSOLE_FERNET_KEYS = [old]
    facts.remember_fact(keys, system, "u1", "city", "Paris")
    facts.remember_fact(keys, system, "u1", "city", "Berlin")
    window.append_message(keys, system, "user", "hello")
    settings.MEMCONSOLE_FERNET_KEYS = [new, old]
    report = rotate_keys()
    assert [report.tables[name].rotated for name in ("facts", "fact_versions", "window_messages")] == [1, 1, 1]
    settings.MEMCONSOLE_FERNET_KEYS = [new]
    assert [f.value for f in facts.recall_facts(keys, "u1")] == ["Berlin"]
    assert [m.content for m in window.recent_messages(keys)] == ["hello"]


def test_an_actor_of_another_bot_is_refused(keys):
    other = Actor("token", "t", frozenset({"bot-b"}))
    with pytest.raises(Exception, match="may not use"):
        facts.remember_fact(keys, other, "u1", "k", "v")
    with pytest.raises(Exception, match="may not use"):
        window.append_message(keys, other, "user", "x")
    assert not Fact.objects.exists() and not WindowMessage.objects.exists()


def test_the_window_size_command(keys, system):
    out = StringIO()
    call_command("set_window_size", "bot-a", "2", stdout=out)
    assert "2 messages" in out.getvalue() and window.window_size("bot-a") == 2
    for n in range(3):
        window.append_message(keys, system, "user", f"m{n}")
    assert [m.content for m in window.recent_messages(keys)] == ["m1", "m2"]
    with pytest.raises(CommandError, match="from 1 to"):
        call_command("set_window_size", "bot-a", "0")
    with pytest.raises(CommandError, match="bot_uuid may not contain ':'"):  # as every other command refuses it
        call_command("set_window_size", "a:b", "5")
