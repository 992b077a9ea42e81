"""The audit hash chain: verifies, and detects edited, deleted and inserted entries; redaction keeps it valid."""

from __future__ import annotations

import itertools
import json
import uuid
from datetime import timedelta

import pytest

from memconsole.memory import audit, episodes, profiles
from memconsole.memory.audit import Actor, verify_audit_chain
from memconsole.memory.erasure import erase_subject
from memconsole.memory.models import AuditEntry, AuditHead

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain(keys, system):
    """Five entries from real operations (profile changes: they need no vector index, which keeps this fast)."""
    for n in range(3):
        profiles.update_profile(keys, system, "speaker", f"u{n}", name="Alice", notes=f"memory number {n}")
    profiles.replace_profile(keys, system, "speaker", "u0", {"notes": "memory number 3"})
    profiles.rollback_profile(keys, system, "speaker", "u0", 1)  # a real rollback: version 1 is not current
    entries = list(AuditEntry.objects.order_by("seq"))
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
    return entries


def test_it_verifies_an_empty_chain():
    report = verify_audit_chain()
    assert report.ok and report.checked == 0


def test_it_verifies_an_intact_chain(chain):
    report = verify_audit_chain()
    assert report.ok and report.checked == 5
    assert str(report) == "audit chain OK (5 entries in 1 chain, 0 checkpoints)"
    assert chain[0].prev_hash == audit.GENESIS
    for previous, entry in itertools.pairwise(chain):
        assert entry.prev_hash == previous.entry_hash
    head = AuditHead.objects.get(chain=chain[0].chain)
    assert (head.seq, head.entry_hash) == (5, chain[-1].entry_hash)


def test_it_verifies_across_batches(chain):
    assert verify_audit_chain(batch=2).ok


@pytest.mark.django_db(transaction=True)
def test_it_refuses_to_append_outside_a_transaction():
    with pytest.raises(RuntimeError, match="atomic"):
        audit.append("remember", Actor.system())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("operation", "delete"),
        ("scope_key", "bot-b:group_200"),
        ("user_key", "bot-b:group_200"),
        ("actor", "user:mallory"),
        ("actor_type", "user"),
        ("sender_id", "u7"),
        ("target_id", "speaker:u9"),
        ("target_type", "session_profile"),
        ("query_id", "forged"),
        ("audit_id", uuid.uuid4().hex),
        ("payload_digest", "0" * 64),
    ],
)
def test_it_detects_an_edited_structural_field(chain, field, value):
    AuditEntry.objects.filter(seq=3).update(**{field: value})
    report = verify_audit_chain()
    assert not report.ok
    assert (report.broken_seq, report.broken_audit_id) == (3, AuditEntry.objects.get(seq=3).audit_id)
    assert "changed" in report.reason
    assert "#3" in str(report)


def test_it_detects_an_edited_timestamp(chain):
    AuditEntry.objects.filter(seq=2).update(timestamp=chain[1].timestamp + timedelta(microseconds=1))
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq) == (False, 2)


def test_it_detects_an_edited_link(chain):
    AuditEntry.objects.filter(seq=4).update(prev_hash=chain[1].entry_hash)
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq, report.reason) == (False, 4, "does not link to the previous entry")


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p.update(summary="remembered: something else"),
        lambda p: p["after"].update(notes="a rewritten memory"),
        lambda p: p.update(sender_name="Mallory"),
        lambda p: p["metadata"].update(extra=1),
        lambda p: p.update(before={"status": "active"}),
    ],
)
def test_it_detects_an_edited_payload(chain, change):
    payload = AuditEntry.objects.get(seq=2).payload
    change(payload)
    AuditEntry.objects.filter(seq=2).update(payload_stored=json.dumps(payload))
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq, report.reason) == (False, 2, "its payload was changed")


def test_it_detects_a_payload_that_no_longer_reads(chain):
    AuditEntry.objects.filter(seq=2).update(payload_stored="{not json")
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq) == (False, 2)
    assert report.reason.startswith("payload unreadable")


def test_it_detects_a_deleted_entry_in_the_middle(chain):
    AuditEntry.objects.filter(seq=3).delete()
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq, report.checked) == (False, 3, 2)
    assert "missing" in report.reason


def test_it_detects_a_deleted_middle_entry_even_when_later_ones_are_renumbered(chain):
    AuditEntry.objects.filter(seq=3).delete()
    for seq in (4, 5):
        AuditEntry.objects.filter(seq=seq).update(seq=seq - 1)
    AuditHead.objects.filter(chain=chain[0].chain).update(seq=4)
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq) == (False, 3)


def test_it_detects_a_deleted_last_entry(chain):
    AuditEntry.objects.filter(seq=5).delete()
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq, report.checked) == (False, 5, 4)
    assert "deleted" in report.reason


def test_it_detects_a_deleted_first_entry(chain):
    AuditEntry.objects.filter(seq=1).delete()
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq) == (False, 1)


def _forge(after: AuditEntry, seq: int) -> AuditEntry:
    """An entry as someone without the audit key would write it: plausible fields, a guessed hash."""
    forged = AuditEntry(
        chain=after.chain,
        seq=seq,
        audit_id=uuid.uuid4().hex,
        timestamp=after.timestamp + timedelta(seconds=1),
        operation="delete",
        scope_key=after.scope_key,
        user_key=after.user_key,
        actor_type="user",
        actor="user:mallory",
        target_type="episode",
        target_id="0123456789ab",
        prev_hash=after.entry_hash,
    )
    forged.set_payload({"summary": "nothing to see", "sender_name": "", "before": None, "after": None, "metadata": {}})
    forged.payload_digest = "f" * 64
    forged.entry_hash = "e" * 64
    forged.save()
    return forged


def test_it_detects_an_inserted_entry_at_the_end(chain):
    _forge(chain[-1], 6)
    AuditHead.objects.filter(chain=chain[0].chain).update(seq=6, entry_hash="e" * 64)
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq) == (False, 6)


def test_it_detects_an_inserted_entry_when_the_head_is_left_alone(chain):
    _forge(chain[-1], 6)
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq) == (False, 6)


def test_it_detects_an_entry_inserted_in_the_middle(chain):
    for seq in (5, 4, 3):
        AuditEntry.objects.filter(seq=seq).update(seq=seq + 1)
    _forge(chain[1], 3)
    AuditHead.objects.filter(chain=chain[0].chain).update(seq=6)
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq) == (False, 3)


def test_it_detects_a_copied_entry_replayed_later(chain):
    copy = AuditEntry.objects.get(seq=2)
    copy.pk, copy.seq, copy.audit_id = None, 6, uuid.uuid4().hex
    copy.prev_hash = chain[-1].entry_hash
    copy.save()
    AuditHead.objects.filter(chain=chain[0].chain).update(seq=6, entry_hash=copy.entry_hash)
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq) == (False, 6)


def test_it_keeps_verifying_after_an_erasure_redacts_a_payload(chain, keys, system):
    """Redacted by a real erasure, bound to its receipt: any other redaction is tampering
    (tests/memory/test_audit_redaction.py)."""
    erase_subject("u1", bot_uuid=keys.bot_uuid, actor=system)

    entry = AuditEntry.objects.get(audit_id=chain[1].audit_id)
    assert entry.redacted
    assert entry.payload["redacted"] == "erasure" and entry.payload["receipt"]
    assert "memory number 1" not in entry.payload_stored
    assert verify_audit_chain().ok
    # and later appends chain on as usual
    episodes.remember(keys, system, "after the erasure")
    assert verify_audit_chain().ok


def test_it_still_detects_structural_edits_of_a_redacted_entry(chain):
    entry = AuditEntry.objects.get(seq=2)
    audit.redact(entry, {"summary": "[erased]"})
    AuditEntry.objects.filter(seq=2).update(operation="remember-forged")
    assert not verify_audit_chain().ok


def test_it_uses_the_audit_key_setting(chain, settings):
    settings.MEMCONSOLE_AUDIT_KEY = "another-key-held-outside-the-database"
    report = verify_audit_chain()
    assert (report.ok, report.broken_seq) == (False, 1)
