"""A redacted audit entry verifies only as an erasure's redaction (docs/design.md §6): its payload is
exactly the erasure form and the receipt it names lists it. Found by a reviewer: the `redacted`
flag is not covered by the HMAC, and the chain skipped the payload digest of a redacted entry, so
`SET redacted=1, payload='{"forged":"yes"}'` rewrote any entry undetected. Rows are tampered here
with SQL, as an attacker who can write the database (but holds no key) would."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from memconsole.lib import vectorpurge, vectors
from memconsole.memory import audit, editing, episodes, erasure, profiles
from memconsole.memory.audit import verify_audit_chain, verify_entries
from memconsole.memory.health.integrity import check_audit_chain
from memconsole.memory.models import AuditEntry, canonical_json
from memconsole.memory.redactions import LISTED, NO_RECEIPT

pytestmark = pytest.mark.django_db

FORGED = "its payload was changed (not an erasure's redaction)"


def _tamper(entry: AuditEntry, payload: dict | str, redacted: bool = True) -> None:
    stored = payload if isinstance(payload, str) else canonical_json(payload)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_auditentry SET redacted = %s, payload = %s, encrypted = %s WHERE id = %s",
            [redacted, stored, False, entry.pk],
        )


def _broken(entry: AuditEntry, reason: str) -> None:
    """The whole-chain walk, one page's check and the health check all name this entry and why."""
    report = verify_audit_chain()
    assert (report.ok, report.broken_audit_id, report.reason) == (False, entry.audit_id, reason), report
    page = verify_entries([AuditEntry.objects.get(pk=entry.pk)])
    assert (page.ok, page.broken_audit_id, page.reason) == (False, entry.audit_id, reason), page
    assert check_audit_chain().status == "ERROR"


def _receipts() -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(operation="erase_subject").order_by("id"))


def _erase_the_old_way(entries: list[AuditEntry], system, at=None) -> AuditEntry:
    """What erasure wrote before receipts listed their redactions: the old form, then a receipt."""
    at = at or timezone.now()
    with transaction.atomic():
        for entry in entries:
            audit.redact(entry, {"redacted": "erasure", "redacted_at": at.isoformat()})
        return audit.append("erase_subject", system, target_type="subject", metadata={"audit_redacted": len(entries)})


@pytest.fixture
def chain(keys, system):
    """Profile changes of two people (no vector index needed), then someone else's."""
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice", notes="lives at 1 Elm Street")
    profiles.update_profile(keys, system, "speaker", "u1", add_traits=["keeps bees"])
    profiles.update_profile(keys, system, "speaker", "u2", name="Bob", notes="plays chess")
    return list(AuditEntry.objects.order_by("id"))


@pytest.mark.parametrize(
    "payload",
    [
        {"forged": "yes"},
        {"summary": "nothing happened here", "sender_name": "", "before": None, "after": None, "metadata": {}},
        {"redacted": "erasure", "redacted_at": "2020-01-01T00:00:00+00:00", "note": "extra key"},
        {"redacted": "other", "redacted_at": "2020-01-01T00:00:00+00:00"},
        {"redacted": "erasure", "redacted_at": "not a time", "receipt": "0" * 32},
        ["not", "a", "dict"],
    ],
)
def test_it_detects_a_payload_rewritten_and_marked_redacted(chain, payload):
    target = chain[2]  # Bob's profile entry: never erased
    _tamper(target, payload)
    _broken(target, FORGED)


def test_it_detects_the_reviewers_forgery_as_reproduced(chain):
    with connection.cursor() as cursor:  # as the reviewer ran it (TRUE: PostgreSQL takes no 1 for a boolean)
        cursor.execute(
            """UPDATE memory_auditentry SET redacted=TRUE, payload='{"forged":"yes"}' WHERE id=%s""", [chain[0].pk]
        )
    assert AuditEntry.objects.get(pk=chain[0].pk).payload == {"forged": "yes"}
    _broken(chain[0], FORGED)


def test_it_detects_the_erasure_form_naming_no_receipt(chain):
    _tamper(chain[2], {"redacted": "erasure", "redacted_at": timezone.now().isoformat(), "receipt": "f" * 32})
    _broken(chain[2], NO_RECEIPT)


def test_it_detects_the_old_form_where_no_erasure_ever_ran(chain):
    _tamper(chain[2], {"redacted": "erasure", "redacted_at": timezone.now().isoformat()})
    _broken(chain[2], NO_RECEIPT)


def test_it_detects_a_redaction_its_receipt_does_not_list(chain, system):
    report = erasure.erase_subject("u1", actor=system)
    [receipt] = _receipts()
    assert receipt.audit_id == report.receipt_audit_id
    [genuine, *_] = AuditEntry.objects.filter(redacted=True)
    assert genuine.payload["receipt"] == receipt.audit_id
    assert verify_audit_chain().ok

    _tamper(chain[2], genuine.payload_stored)  # a real redaction copied onto Bob's entry

    _broken(chain[2], NO_RECEIPT)


def test_it_detects_a_receipt_whose_list_was_extended(chain, system):
    erasure.erase_subject("u1", actor=system)
    [receipt] = _receipts()
    payload = receipt.payload
    payload["metadata"][LISTED].append(chain[2].audit_id)
    _tamper(receipt, payload, redacted=False)
    _tamper(chain[2], {"redacted": "erasure", "redacted_at": timezone.now().isoformat(), "receipt": receipt.audit_id})

    report = verify_audit_chain()
    assert not report.ok and report.broken_audit_id in (receipt.audit_id, chain[2].audit_id)
    assert not verify_entries([AuditEntry.objects.get(pk=chain[2].pk)]).ok


def test_it_verifies_real_erasures_that_touch_the_same_entry_and_one_resumed(keys, system, monkeypatch):
    moved = episodes.remember(keys, system, "Met the plumber", sender_id="victim7", sender_name="Zed").episode
    editing.reassign_speaker(keys, system, moved.episode_id, "bob", "Bob")
    episodes.remember(keys, system, "Bob plays chess on Sundays", sender_id="bob", sender_name="Bob")
    assert verify_audit_chain().ok

    first = erasure.erase_subject("victim7", bot_uuid=keys.bot_uuid, actor=system)
    reassign = AuditEntry.objects.get(operation="episode_reassign")
    assert reassign.redacted and reassign.payload["receipt"] == first.receipt_audit_id
    assert verify_audit_chain().ok

    # Bob's erasure finds the same entries (the moved episode is his now): they stay bound to the first.
    monkeypatch.setattr(vectorpurge, "rebuild_collection", _interrupted)
    second = erasure.erase_subject("bob", bot_uuid=keys.bot_uuid, actor=system)
    assert second.vector_index["ok"] is False
    reassign.refresh_from_db()
    assert reassign.payload["receipt"] == first.receipt_audit_id
    assert verify_audit_chain().ok

    # Resumed after Bob wrote again: a second receipt lists only what it redacted.
    episodes.remember(keys, system, "Bob moved to Lyon", sender_id="bob", sender_name="Bob")
    monkeypatch.undo()
    third = erasure.erase_subject("bob", bot_uuid=keys.bot_uuid, actor=system)
    assert third.resumed and third.vector_index["ok"] is True
    receipts = {receipt.audit_id: receipt.payload["metadata"] for receipt in _receipts()}
    assert list(receipts) == [first.receipt_audit_id, second.receipt_audit_id, third.receipt_audit_id]
    assert receipts[third.receipt_audit_id]["resumed"] and len(receipts[third.receipt_audit_id][LISTED]) == 1
    for entry in AuditEntry.objects.filter(redacted=True):
        assert entry.audit_id in receipts[entry.payload["receipt"]][LISTED]
    assert len({entry.payload["receipt"] for entry in AuditEntry.objects.filter(redacted=True)}) == 3

    # Run once more with nothing left: the chain still verifies, whole and page by page.
    erasure.erase_subject("bob", bot_uuid=keys.bot_uuid, actor=system)
    assert verify_audit_chain().ok
    assert verify_entries(list(AuditEntry.objects.all())).ok
    assert check_audit_chain().status == "OK"


def _interrupted(user_key, batch=2000):
    raise vectors.VectorIndexError("killed while rebuilding")


def test_it_verifies_entries_redacted_before_receipts_listed_them(chain, system):
    old = _erase_the_old_way(chain[:2], system)
    assert LISTED not in old.payload["metadata"]
    assert verify_audit_chain().ok
    assert verify_entries(list(AuditEntry.objects.all())).ok


def test_it_detects_the_old_form_on_an_entry_newer_than_every_old_receipt(chain, keys, system):
    _erase_the_old_way(chain[:1], system)
    profiles.update_profile(keys, system, "speaker", "u3", name="Cy")
    target = AuditEntry.objects.order_by("-id").first()
    # Backdated to before the old receipt: the entry itself is newer than it, so no old erasure redacted it.
    _tamper(target, {"redacted": "erasure", "redacted_at": (timezone.now() - timedelta(days=1)).isoformat()})
    _broken(target, NO_RECEIPT)


def test_it_detects_the_old_form_dated_after_every_old_receipt(chain, system):
    _erase_the_old_way(chain[:1], system)
    _tamper(chain[2], {"redacted": "erasure", "redacted_at": (timezone.now() + timedelta(hours=1)).isoformat()})
    _broken(chain[2], NO_RECEIPT)


def test_it_binds_an_entry_redacted_the_old_way_to_the_next_erasure_that_finds_it(chain, system):
    _erase_the_old_way(chain[:2], system)
    report = erasure.erase_subject("u1", actor=system)
    redacted = list(AuditEntry.objects.filter(redacted=True))
    assert {entry.audit_id for entry in redacted} == {chain[0].audit_id, chain[1].audit_id}
    assert {entry.payload["receipt"] for entry in redacted} == {report.receipt_audit_id}
    assert verify_audit_chain().ok


def test_a_redacted_payload_names_its_receipt_and_the_receipt_lists_it(fernet_keys, chain, system):
    report = erasure.erase_subject("u1", actor=system)
    [receipt] = _receipts()
    listed = receipt.payload["metadata"][LISTED]
    assert listed == sorted([chain[0].audit_id, chain[1].audit_id])
    for entry in AuditEntry.objects.filter(redacted=True):
        assert set(entry.payload) == {"redacted", "redacted_at", "receipt"}
        assert entry.payload["receipt"] == report.receipt_audit_id
        assert "Elm Street" not in json.dumps(entry.payload)
    assert verify_audit_chain().ok


def test_moving_an_entry_into_another_batch_is_detected(keys, system):
    """Found by an auditor: the batch_id column (what the console's ?batch= and the batch folding
    read) was not compared with the payload's copy, which the chain covers."""
    with audit.batch() as batch_id:
        episodes.remember(keys, system, "one of a batch")
    episodes.remember(keys, system, "not in it")
    assert verify_audit_chain().ok
    loner = AuditEntry.objects.filter(batch_id="").latest("id")

    AuditEntry.objects.filter(pk=loner.pk).update(batch_id=batch_id)

    report = verify_audit_chain()
    assert not report.ok and "its batch was changed" in report.reason
