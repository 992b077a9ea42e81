"""Scope exports: one streamed JSON document of LangBot-compatible envelopes, audited."""

from __future__ import annotations

import json
import os
import stat
import threading
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command

import memconsole
from memconsole.memory import episodes, exports, profiles
from memconsole.memory.audit import Actor, verify_audit_chain
from memconsole.memory.errors import PermissionDenied, ValidationError
from memconsole.memory.models import AuditEntry, Episode
from memconsole.memory.scopes import derive_scope
from tests.factories import hex_id, plain_episodes

pytestmark = pytest.mark.django_db


def _export(keys, actor, **kwargs) -> dict:
    return json.loads("".join(exports.stream_scope_export(keys, actor, **kwargs)))


@pytest.fixture
def profiled(scope_with_episodes, keys, system):
    profiles.update_profile(keys, system, "session", name="Travel club", add_traits=["friendly"], notes="多语言群")
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice", add_preferences=["window seat"])
    return scope_with_episodes


def test_it_exports_one_document_with_profiles_and_episodes(profiled, keys, system):
    doc = _export(keys, system)

    assert doc["format"] == "memconsole-scope-export"
    assert doc["format_version"] == 1
    assert doc["memconsole_version"] == memconsole.__version__
    assert doc["scope"] == {
        "bot_uuid": "bot-a",
        "session_name": "group_100",
        "isolation": "session",
        "scope_key": "bot-a:group_100",
        "user_key": "bot-a:group_100",
    }
    profiles = doc["profiles"]
    assert (
        profiles["version"] == 1 and profiles["scope_key"] == keys.scope_key and profiles["user_key"] == keys.user_key
    )
    assert profiles["count"] == 2 == len(profiles["profiles"])
    session, speaker = profiles["profiles"]
    assert session["type"] == "session" and "sender_id" not in session
    assert session["profile"]["name"] == "Travel club" and session["profile"]["notes"] == "多语言群"
    assert session["profile"]["updated_at"].endswith("Z")
    assert speaker["type"] == "speaker" and speaker["sender_id"] == "u1"
    assert speaker["profile"]["preferences"] == ["window seat"]

    episodes = doc["episodes"]
    assert episodes["version"] == 1 and episodes["statuses"] == ["active", "superseded", "archived"]
    assert episodes["count"] == 4 == len(episodes["episodes"])
    first = episodes["episodes"][0]
    row = profiled[0]
    assert first == {
        "id": row.episode_id,
        "content": "I am planning a trip to Beijing next month",
        "tags": ["travel"],
        "importance": 2,
        "timestamp": row.timestamp.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "sender_id": "u1",
        "sender_name": "Alice",
        "source": "agent",
        "status": "active",
        "superseded_by": "",
    }
    assert [e["status"] for e in episodes["episodes"]] == ["active", "active", "active", "archived"]
    assert episodes["episodes"][2]["content"] == "我喜欢喝绿茶"
    assert "audit" not in doc


def test_it_decrypts_content_when_encryption_is_on(settings, keys, system):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    episodes.remember(keys, system, "a sealed secret about tea", sender_id="u7")
    profiles.update_profile(keys, system, "speaker", "u7", name="Sealed")
    assert Episode.objects.get().encrypted

    doc = _export(keys, system)

    assert doc["episodes"]["episodes"][0]["content"] == "a sealed secret about tea"
    assert doc["profiles"]["profiles"][0]["profile"]["name"] == "Sealed"


def test_it_exports_only_its_own_scope(profiled, keys, other_keys, system):
    episodes.remember(other_keys, system, "another bot's memory", sender_id="u1")
    profiles.update_profile(other_keys, system, "speaker", "u1", name="Other Alice")

    doc = _export(keys, system)

    assert "another bot's memory" not in json.dumps(doc, ensure_ascii=False)
    assert "Other Alice" not in json.dumps(doc, ensure_ascii=False)
    assert _export(other_keys, system)["episodes"]["count"] == 1


def test_it_filters_by_status_and_reads_unknown_status_as_active(profiled, keys, system):
    Episode.objects.filter(pk=profiled[1].pk).update(status="weird")

    archived = _export(keys, system, statuses=["archived"])
    active = _export(keys, system, statuses=["active"])

    assert [e["content"] for e in archived["episodes"]["episodes"]] == ["The team meeting moved to Thursday"]
    assert archived["episodes"]["statuses"] == ["archived"]
    assert active["episodes"]["count"] == 3
    assert {e["status"] for e in active["episodes"]["episodes"]} == {"active"}


def test_it_refuses_a_bad_status_or_another_bots_actor_before_any_byte(profiled, keys):
    with pytest.raises(ValidationError):
        exports.stream_scope_export(keys, Actor.system(), statuses=["gone"])
    limited = Actor("token", "token:x", frozenset({"bot-b"}))
    with pytest.raises(PermissionDenied):
        exports.stream_scope_export(keys, limited)
    assert not AuditEntry.objects.filter(operation="export").exists()


def test_it_audits_the_export_when_called_with_its_counts_even_if_never_read(profiled, keys, system):
    stream = exports.stream_scope_export(keys, system, statuses=["active"])

    entry = AuditEntry.objects.get(operation="export")
    assert entry.scope_key == keys.scope_key
    assert entry.payload["metadata"] == {
        "statuses": ["active"],
        "episodes": 3,
        "profiles": 2,
        "include_audit": False,
        "audit_entries": 0,
    }
    assert stream.counts == {"profiles": 2, "episodes": 3, "audit_entries": 0}
    stream.close()
    assert verify_audit_chain().ok


def test_it_includes_the_audit_log_up_to_its_own_entry(profiled, keys, other_keys, system):
    episodes.remember(other_keys, system, "not this scope's audit")

    doc = _export(keys, system, include_audit=True)

    entries = doc["audit"]["entries"]
    assert doc["audit"]["count"] == len(entries)
    assert entries[-1]["operation"] == "export"
    assert entries[-1]["metadata"]["audit_entries"] == len(entries)
    assert {e["scope_key"] for e in entries} == {keys.scope_key}
    remembered = [e for e in entries if e["operation"] == "remember"]
    assert len(remembered) == 4 and remembered[0]["summary"].startswith("remembered: ")
    assert [e["seq"] for e in entries] == sorted(e["seq"] for e in entries)


def test_it_streams_large_scopes_in_batches_with_few_queries(keys, system, django_assert_max_num_queries):
    now = datetime.now(UTC)
    plain_episodes(
        keys,
        1200,
        content="bulk memory number {n} 第{n}条",
        episode_id=hex_id,
        timestamp=lambda n: now - timedelta(minutes=n),
        importance=lambda n: 1 + n % 5,
    )

    # Issue 20: +1 a batch (the episodes' metadata, prefetched), +2 (the space's facts, the chat's window).
    with django_assert_max_num_queries(27):
        chunks = list(exports.stream_scope_export(keys, system))

    whole = "".join(chunks)
    assert max(len(chunk) for chunk in chunks) < len(whole) / 2  # no chunk holds the whole scope
    assert len(chunks) >= 1200 // exports.BATCH
    doc = json.loads(whole)
    assert doc["episodes"]["count"] == 1200
    assert [e["id"] for e in doc["episodes"]["episodes"]] == [f"{n:012x}" for n in range(1200)]
    assert doc["episodes"]["episodes"][1199]["importance"] == 5


def test_it_leaves_out_rows_added_while_streaming(profiled, keys, system):
    stream = exports.stream_scope_export(keys, system)
    episodes.remember(keys, system, "arrived during the download")

    doc = json.loads("".join(stream))

    assert doc["episodes"]["count"] == 4


def test_it_exports_the_audit_log_alone(profiled, keys, system):
    stream = exports.stream_audit_export(keys, system)
    doc = json.loads("".join(stream))

    assert doc["format"] == "memconsole-audit-export" and doc["version"] == 1
    assert doc["count"] == len(doc["entries"]) == stream.counts["audit_entries"]
    assert doc["entries"][-1]["operation"] == "audit_export"


def test_it_makes_a_safe_file_name():
    keys = derive_scope("bot-a", 'grp/../"x"\\y', "bot")
    name = exports.export_filename(keys)
    assert name.startswith("memconsole-bot-a_grp_.._x_y-bot-") and name.endswith(".json")
    assert "/" not in name and "\\" not in name and '"' not in name


def test_it_exports_from_the_command_line(profiled, keys, tmp_path, capsys):
    target = tmp_path / "out.json"
    call_command("export_scope", keys.scope_key, "-o", str(target), "--audit", "--statuses", "active", "archived")

    doc = json.loads(target.read_text(encoding="utf-8"))
    assert doc["episodes"]["count"] == 4 and doc["audit"]["count"] > 0
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    assert "Exported bot-a:group_100 (session)" in capsys.readouterr().err


def test_it_writes_through_a_symlink_and_into_a_fifo_without_replacing_them(profiled, keys, tmp_path):
    """Found by probing the command: `-o` renamed its temporary file over whatever was there."""
    real = tmp_path / "real.json"
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    call_command("export_scope", keys.scope_key, "-o", str(link))
    assert link.is_symlink() and json.loads(real.read_text(encoding="utf-8"))["episodes"]["count"] > 0

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    call_command("export_scope", keys.scope_key, "-o", str(fifo))
    reader.join(timeout=30)
    assert stat.S_ISFIFO(fifo.stat().st_mode) and json.loads(received[0])["episodes"]["count"] > 0


def test_it_says_plainly_when_the_output_folder_is_missing(profiled, keys, tmp_path):
    with pytest.raises(CommandError, match=r"the folder of .* does not exist"):
        call_command("export_scope", keys.scope_key, "-o", str(tmp_path / "nowhere" / "x.json"))


def test_it_fails_clearly_for_an_unknown_scope_on_the_command_line(db):
    with pytest.raises(CommandError, match="no scope 'nope:group_1'"):
        call_command("export_scope", "nope:group_1")


def test_it_says_plainly_when_no_configured_key_opens_the_rows(keys, system, tmp_path, settings):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    episodes.remember(keys, system, "Alice's sealed secret")
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]  # the old key is gone
    with pytest.raises(CommandError, match="None of the keys in MEMCONSOLE_FERNET_KEYS opens"):
        call_command("export_scope", keys.scope_key, "-o", str(tmp_path / "out.json"))
    assert not (tmp_path / "out.json").exists()  # no half-written export
