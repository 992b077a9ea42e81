"""Erasure of one person: profiles, episodes, snapshots, audit payloads, vectors; the chain verifies.

The last test runs the real commands in a subprocess on file-based SQLite and embedded Chroma and
searches every file byte for the person's id and content."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.db import connection

from memconsole.lib import chromafiles, vectorpurge, vectors
from memconsole.memory import audit, editing, episodes, erasure, injection, paging, profiles, retrieval
from memconsole.memory.audit import Actor, verify_audit_chain
from memconsole.memory.errors import PermissionDenied, ValidationError
from memconsole.memory.models import AuditEntry, Episode, EpisodeCounts, InjectionSnapshot, Profile, ProfileVersion
from memconsole.memory.reindex import reindex
from memconsole.memory.scopes import derive_scope
from tests.chroma_server import server_mode
from tests.conftest import MODEL_DIR
from tests.processes import run_script

from .conftest import remember_holding_the_chain

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"


@pytest.fixture
def world(scope_with_episodes, keys, other_keys, system):
    """u1 (Alice) in two bots, with a profile, snapshots as speaker, and episodes inside Bob's snapshot."""
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice", add_traits=["loves Beijing"])
    profiles.update_profile(keys, system, "speaker", "u1", add_preferences=["aisle seat"])
    profiles.update_profile(keys, system, "speaker", "u2", name="Bob")
    episodes.remember(other_keys, system, "Alice keeps bees in bot b", sender_id="u1", sender_name="Alice")
    profiles.update_profile(other_keys, system, "speaker", "u1", name="Alice B")
    alice_snapshot = injection.record_injection(
        keys, system, "trip to Beijing", sender_id="u1", sender_name="Alice", top_k=5
    )
    bob_snapshot = injection.record_injection(
        keys, system, "Beijing trip and dumplings", sender_id="u2", sender_name="Bob", top_k=5
    )
    assert any(e["sender_id"] == "u1" for e in bob_snapshot.snapshot.payload["episodes"])
    return {"alice_snapshot": alice_snapshot.snapshot, "bob_snapshot": bob_snapshot.snapshot}


def test_it_counts_first_with_a_dry_run_and_changes_nothing(world, system):
    before = (
        Episode.objects.count(),
        Profile.objects.count(),
        InjectionSnapshot.objects.count(),
        AuditEntry.objects.count(),
    )
    payloads = list(AuditEntry.objects.order_by("id").values_list("payload_stored", flat=True))

    report = erasure.erase_subject("u1", actor=system, dry_run=True)

    assert report.dry_run
    assert (report.episodes, report.profiles, report.profile_versions) == (3, 2, 3)
    assert (report.snapshots_deleted, report.snapshots_redacted) == (1, 1)
    assert report.audit_redacted > 0 and report.receipt_audit_id == ""
    assert (
        Episode.objects.count(),
        Profile.objects.count(),
        InjectionSnapshot.objects.count(),
        AuditEntry.objects.count(),
    ) == before
    assert list(AuditEntry.objects.order_by("id").values_list("payload_stored", flat=True)) == payloads


def test_it_erases_a_person_everywhere_and_keeps_the_chain(world, keys, other_keys, system):
    u1_ids = set(Episode.objects.filter(sender_id="u1").values_list("episode_id", flat=True))
    bob_ids = set(Episode.objects.filter(sender_id="u2").values_list("episode_id", flat=True))

    report = erasure.erase_subject("u1", actor=system)

    assert (report.episodes, report.profiles, report.profile_versions) == (3, 2, 3)
    assert not Episode.objects.filter(sender_id="u1").exists()
    assert set(Episode.objects.values_list("episode_id", flat=True)) == bob_ids
    assert (
        not Profile.objects.filter(sender_id="u1").exists()
        and not ProfileVersion.objects.filter(profile__sender_id="u1").exists()
    )
    assert profiles.get_profile(keys, "speaker", "u2")[0]["name"] == "Bob"
    # snapshots: Alice's is gone, Bob's no longer holds her episodes nor her rendered memory
    assert not InjectionSnapshot.objects.filter(snapshot_id=world["alice_snapshot"].snapshot_id).exists()
    bob = InjectionSnapshot.objects.get(snapshot_id=world["bob_snapshot"].snapshot_id)
    assert {e["sender_id"] for e in bob.payload["episodes"]} == {"u2"}
    assert "Alice" not in json.dumps(bob.payload) and "Beijing next month" not in json.dumps(bob.payload)
    assert (
        bob.episode_count == len(bob.payload["episodes"])
        and "My favourite food is dumplings" in bob.payload["system_blocks"][-1]
    )
    # vectors
    assert not set(vectors.all_ids(keys.user_key)) & u1_ids
    assert set(vectors.all_ids(keys.user_key)) == bob_ids
    assert vectors.all_ids(other_keys.user_key) == []
    assert retrieval.recall(keys, "dumplings", top_k=1)[0].episode.sender_id == "u2"  # the rebuilt index still answers
    # counters
    counts = EpisodeCounts.objects.get(user_key=keys.user_key)
    assert (counts.active, counts.archived) == (2, 0)
    # audit: nothing names u1 or holds her content; the chain verifies; one receipt
    for entry in AuditEntry.objects.all():
        text = json.dumps(entry.payload, ensure_ascii=False)
        assert '"u1"' not in text and "Beijing next month" not in text and "bees" not in text
        assert entry.sender_id != "u1" and entry.target_id != "speaker:u1"
    assert verify_audit_chain().ok
    receipt = AuditEntry.objects.get(operation="erase_subject")
    assert receipt.audit_id == report.receipt_audit_id
    assert receipt.payload["metadata"]["subject_digest"] == audit.subject_digest("u1") == report.subject_digest
    assert receipt.payload["metadata"]["episodes"] == 3
    redacted = AuditEntry.objects.filter(redacted=True)
    assert redacted.count() == report.audit_redacted
    assert redacted.filter(sender_id=audit.ERASED_PREFIX + audit.subject_digest("u1")).exists()


def test_it_erases_within_one_bot_only(world, keys, other_keys, system):
    report = erasure.erase_subject("u1", bot_uuid="bot-b", actor=system)

    assert (report.episodes, report.profiles) == (1, 1)
    assert list(Episode.objects.filter(sender_id="u1").values_list("bot_uuid", flat=True).distinct()) == ["bot-a"]
    assert Profile.objects.filter(sender_id="u1", scope_key=keys.scope_key).exists()
    assert not Profile.objects.filter(sender_id="u1", scope_key=other_keys.scope_key).exists()
    assert InjectionSnapshot.objects.filter(speaker_id="u1").exists()
    assert verify_audit_chain().ok


def test_it_erases_under_encryption(settings, keys, system):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    episodes.remember(keys, system, "sealed diary entry of u9", sender_id="u9")
    episodes.remember(keys, system, "someone else's note", sender_id="u8")
    injection.record_injection(keys, system, "diary entry", sender_id="u8", top_k=5)

    report = erasure.erase_subject("u9", actor=system)

    assert report.episodes == 1 and report.snapshots_redacted == 1
    snapshot = InjectionSnapshot.objects.get()
    assert snapshot.encrypted and "u9" not in json.dumps(snapshot.payload)
    assert verify_audit_chain().ok


def test_it_refuses_bad_input_and_foreign_bots(db):
    with pytest.raises(ValidationError):
        erasure.erase_subject("  ", actor=Actor.system())
    limited = Actor("token", "t", frozenset({"bot-a"}))
    with pytest.raises(PermissionDenied):
        erasure.erase_subject("u1", actor=limited)
    with pytest.raises(PermissionDenied):
        erasure.erase_subject("u1", bot_uuid="bot-b", actor=limited)


def test_it_erases_from_the_command_line(world, capsys):
    call_command("erase_subject", "--sender-id", "u1", "--dry-run")
    assert "would erase 3 episodes, 2 speaker profiles (3 versions), 1 snapshots" in capsys.readouterr().out
    assert Episode.objects.filter(sender_id="u1").count() == 3

    call_command("erase_subject", "--sender-id", "u1")
    out = capsys.readouterr()
    assert "erased 3 episodes" in out.out and "(receipt " in out.out
    assert "collections rebuilt" in out.err
    assert not Episode.objects.filter(sender_id="u1").exists()

    with pytest.raises(CommandError, match="sender_id is required"):
        call_command("erase_subject", "--sender-id", "")


# --- no trace on disk ---------------------------------------------------------------------------

SUBJECT = "subject-7f3a9e"
MARKERS = ["Zanzibar-marker-9931", "秘密花园-标记"]


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _script(env: dict[str, str], name: str, payload: dict) -> subprocess.CompletedProcess:
    result = run_script(SCRIPTS / name, env, payload)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _needles() -> list[bytes]:
    texts = [SUBJECT, *MARKERS]
    out = []
    for text in texts:
        out.append(text.encode("utf-8"))
        out.append(json.dumps(text).strip('"').encode("ascii"))  # \\u-escaped form, for CJK
    return out


def _files_holding(folder: Path, needles: list[bytes]) -> dict[str, list[bytes]]:
    found: dict[str, list[bytes]] = {}
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits = [needle for needle in needles if needle in data]
            if hits:
                found[str(path.relative_to(folder))] = hits
    return found


def test_it_leaves_no_trace_in_database_index_exports_or_snapshots(tmp_path):
    database = tmp_path / "memconsole.sqlite3"
    chroma = tmp_path / "chroma"
    out = tmp_path / "out"
    out.mkdir()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "CHROMA_PATH": str(chroma),
        "CHROMA_HOST": "",
        "MEMCONSOLE_MODEL_DIR": str(MODEL_DIR),
        "MEMCONSOLE_VAR_DIR": str(tmp_path / "var"),
        "MEMCONSOLE_FERNET_KEYS": "",
        "MEMCONSOLE_SNAPSHOT_RETENTION_DAYS": "0",
        "SECRET_KEY": "erasure-test-secret-key-of-reasonable-length-0123456789",
    }
    env.pop("MEMCONSOLE_ENV", None)
    _manage(env, "migrate", "--verbosity", "0")
    _script(env, "erasure_setup.py", {"subject": SUBJECT, "markers": MARKERS})
    needles = _needles()
    before = _files_holding(tmp_path, needles)
    assert any(name.startswith("memconsole.sqlite3") for name in before), before  # the test can see the data
    assert any(name.startswith("chroma") for name in before), before

    dry = _manage(env, "erase_subject", "--sender-id", SUBJECT, "--dry-run")
    assert "would erase 3 episodes, 1 speaker profiles (2 versions), 1 snapshots" in dry.stdout
    erased = _manage(env, "erase_subject", "--sender-id", SUBJECT)
    assert "erased 3 episodes" in erased.stdout
    assert "collections rebuilt, compacted; database: compacted" in erased.stderr, erased.stderr
    checked = _script(env, "erasure_check.py", {"out": str(out)})

    assert "CHAIN True" in checked.stdout, checked.stdout
    assert _files_holding(tmp_path, needles) == {}
    group = json.loads((out / "group.json").read_text(encoding="utf-8"))
    assert group["episodes"]["count"] == 30 and group["profiles"]["count"] == 0
    assert "erase_subject" not in {e["operation"] for e in group["audit"]["entries"]}  # the receipt belongs to no scope
    assert any(e["redacted"] for e in group["audit"]["entries"])
    snapshots = json.loads((out / "snapshots.json").read_text(encoding="utf-8"))
    assert len(snapshots) == 1 and snapshots[0]["speaker"]["id"] == "other-9"


# --- locks, the vector index's failures (review) --------------------------------------------------


def _watch_scans(monkeypatch) -> list[tuple[str, bool]]:
    """(model scanned, inside a transaction?) for every batched scan erasure makes."""

    seen: list[tuple[str, bool]] = []
    real = paging.iter_in_batches

    def watched(queryset, batch=1000):
        seen.append((queryset.model.__name__, connection.in_atomic_block))
        return real(queryset, batch)

    monkeypatch.setattr(paging, "iter_in_batches", watched)
    return seen


@pytest.mark.django_db(transaction=True)
def test_it_searches_outside_any_transaction_so_bots_keep_writing(world, system, monkeypatch):
    # On SQLite a transaction holds the database's write lock from its start (IMMEDIATE): the scan
    # of the whole audit log and every snapshot must not run inside one.
    seen = _watch_scans(monkeypatch)

    report = erasure.erase_subject("u1", actor=system, dry_run=True)

    assert report.audit_redacted > 0
    assert ("AuditEntry", False) in seen and ("InjectionSnapshot", False) in seen
    assert all(not inside for _, inside in seen)

    seen.clear()
    erasure.erase_subject("u1", actor=system)

    full_scans = [inside for model, inside in seen if model == "AuditEntry"]
    assert full_scans[0] is False  # the whole log is read before the transaction; inside, only what came since
    assert not Episode.objects.filter(sender_id="u1").exists() and verify_audit_chain().ok


def test_it_erases_what_was_written_between_its_search_and_its_transaction(world, keys, system, monkeypatch):
    real_find = erasure._find  # noqa: SLF001  wrapped below, to write between erasure's search and its transaction

    def find_then_a_bot_writes(*args, **kwargs):
        found = real_find(*args, **kwargs)
        late = episodes.remember(keys, system, "Alice's late note about Beijing", sender_id="u1", sender_name="Alice")
        injection.record_injection(keys, system, "late note about Beijing", sender_id="u2", top_k=10)
        episodes.archive(keys, system, [late.episode.episode_id])
        return found

    monkeypatch.setattr(erasure, "_find", find_then_a_bot_writes)

    report = erasure.erase_subject("u1", actor=system)

    assert report.episodes == 4 and not Episode.objects.filter(sender_id="u1").exists()
    for entry in AuditEntry.objects.all():
        text = json.dumps(entry.payload, ensure_ascii=False)
        assert '"u1"' not in text and "Alice's late note" not in text
        assert entry.sender_id != "u1"
    for snapshot in InjectionSnapshot.objects.all():
        assert "Alice's late note" not in json.dumps(snapshot.payload, ensure_ascii=False)
    assert verify_audit_chain().ok


@pytest.mark.skipif(
    server_mode(), reason="locks the embedded index's own chroma.sqlite3, which a Chroma server keeps on its host"
)
def test_it_reports_a_locked_index_database_while_compacting(world, system, settings, monkeypatch, caplog):
    real_compact = vectors.compact_storage

    def compact_while_another_process_holds_the_file():
        locker = sqlite3.connect(Path(settings.CHROMA_PATH) / "chroma.sqlite3", isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            return real_compact()
        finally:
            locker.execute("ROLLBACK")
            locker.close()

    monkeypatch.setattr(chromafiles, "LOCK_TIMEOUT", 0.2)
    monkeypatch.setattr(vectors, "compact_storage", compact_while_another_process_holds_the_file)

    report = erasure.erase_subject("u1", actor=system)

    assert report.vector_index["ok"] is False
    assert "database is locked" in report.vector_index["error"]
    assert "the vector index was not fully purged" in caplog.text
    assert report.receipt_audit_id and not Episode.objects.filter(sender_id="u1").exists()


def test_it_marks_a_scopes_rows_not_current_while_its_collection_is_rebuilt(world, keys, system, monkeypatch):
    real_rebuild = vectorpurge.rebuild_collection
    during: dict[str, set[bool]] = {}

    def watched(user_key, batch=2000):
        during[user_key] = set(Episode.objects.filter(user_key=user_key).values_list("vector_current", flat=True))
        return real_rebuild(user_key, batch)

    monkeypatch.setattr(vectorpurge, "rebuild_collection", watched)

    report = erasure.erase_subject("u1", actor=system)

    assert report.vector_index["ok"] and during[keys.user_key] == {False}
    assert set(Episode.objects.values_list("vector_current", flat=True)) == {True}
    check = reindex(check_only=True)
    assert (check.not_current, check.missing, check.stale) == (0, 0, 0)


def test_it_leaves_a_scope_to_reindex_when_its_collection_rebuild_fails(world, keys, system, monkeypatch):
    def interrupted(user_key, batch=2000):
        raise vectors.VectorIndexError("the rebuild was interrupted")

    monkeypatch.setattr(vectorpurge, "rebuild_collection", interrupted)

    report = erasure.erase_subject("u1", actor=system)

    assert report.vector_index == {"ok": False, "error": "VectorIndexError: the rebuild was interrupted"}
    left = Episode.objects.filter(user_key=keys.user_key)
    assert left.exists() and not left.filter(vector_current=True).exists()
    check = reindex(check_only=True)
    assert check.not_current == left.count()
    reindex(check_only=False)
    assert set(left.values_list("vector_current", flat=True)) == {True}
    assert retrieval.recall(keys, "dumplings", top_k=1)[0].episode.sender_id == "u2"


def test_it_erases_beside_a_remember_holding_the_audit_chain_without_a_deadlock(postgresql, world, keys, system):
    writer, outcome = remember_holding_the_chain(keys, system)

    report = erasure.erase_subject("u1", actor=system)
    writer.join(30)

    assert "error" not in outcome, outcome.get("error")
    assert report.episodes == 3 and report.receipt_audit_id
    counts = EpisodeCounts.objects.get(user_key=keys.user_key)
    assert (counts.active, counts.archived) == (2, 0)
    assert verify_audit_chain().ok


@pytest.mark.parametrize("written", ["\ufeffwes", "wes\u200b", " wes "])
def test_it_erases_a_person_named_with_the_invisible_characters_a_write_trims(keys, system, written):
    """Found by an auditor: "\\ufeffwes" is stored as wes by every write, but erasing "\\ufeffwes"
    erased nothing (only spaces were trimmed) and filed its receipt under another person."""
    kept = episodes.remember(keys, system, "Wes has a secret", sender_id=written).episode
    assert kept.sender_id == "wes"

    report = erasure.erase_subject(written, actor=system)

    assert report.episodes == 1 and not Episode.objects.filter(sender_id="wes").exists()


def test_erasing_the_author_of_a_correction_brings_back_what_it_corrected(keys, system):
    """Found by a user: a correction reassigned to Mia in the console, then Mia erased, left Leo's
    memory superseded by an episode that no longer existed: recall never saw it again."""
    leo = episodes.remember(keys, system, "I live in Lisbon and work as a nurse", sender_id="leo", importance=4).episode
    correction = episodes.remember(
        keys, system, "Correction: I live in Lisbon and work as a nurse now", tags=["correction"], sender_id="leo"
    ).episode
    assert Episode.objects.get(pk=leo.pk).status == "superseded"
    editing.reassign_speaker(keys, system, correction.episode_id, "mia")

    erasure.erase_subject("mia", actor=system)

    back = Episode.objects.get(pk=leo.pk)
    assert (back.status, back.superseded_by, back.importance) == ("active", "", 4)
    entry = AuditEntry.objects.filter(operation="restore", target_id=back.episode_id).get()
    assert entry.payload["metadata"]["reason"] == "the correction that superseded it was erased"
    assert "mia" not in json.dumps(entry.payload) and verify_audit_chain().ok
    hits = retrieval.recall(keys, "Where does Leo live?", sender_id="leo")
    assert [hit.episode.episode_id for hit in hits] == [back.episode_id]


def test_it_brings_back_what_was_hidden_in_a_chat_used_under_both_isolation_modes(keys, system):
    """The chat group_100 is a space of its own and a chat of bot-a's shared memory: two spaces with
    one scope_key. Restoring what the erased correction hid must pick the right one."""
    shared = derive_scope(keys.bot_uuid, keys.session_name, "bot")
    episodes.remember(shared, system, "a memory of the bot's shared space", sender_id="zoe")
    leo = episodes.remember(keys, system, "I live in Lisbon and work as a nurse", sender_id="leo").episode
    correction = episodes.remember(
        keys, system, "Correction: I live in Lisbon and work as a nurse now", tags=["correction"], sender_id="leo"
    ).episode
    editing.reassign_speaker(keys, system, correction.episode_id, "mia")

    erasure.erase_subject("mia", actor=system)

    back = Episode.objects.get(pk=leo.pk)
    assert (back.status, back.user_key) == ("active", keys.user_key)
