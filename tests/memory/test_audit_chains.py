"""One audit chain per space, anchored in chained checkpoints (issue 22): writes to different spaces
never wait on each other, and deleting or reordering entries in any chain is still detected."""

from __future__ import annotations

import threading

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from memconsole.memory import audit, checkpoints, profiles, tokens
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.health import integrity
from memconsole.memory.models import AuditCheckpoint, AuditEntry, AuditHead

pytestmark = pytest.mark.django_db


def _chain(keys) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(chain=keys.scope_key).order_by("seq"))


@pytest.fixture
def two_spaces(keys, other_keys, system):
    for n in range(3):
        profiles.update_profile(keys, system, "speaker", f"u{n}", notes=f"first space {n}")
    for n in range(2):
        profiles.update_profile(other_keys, system, "speaker", f"v{n}", notes=f"second space {n}")
    return keys, other_keys


def test_each_space_has_its_own_chain_numbered_from_one(two_spaces):
    keys, other_keys = two_spaces
    first, second = _chain(keys), _chain(other_keys)
    assert [e.seq for e in first] == [1, 2, 3] and [e.seq for e in second] == [1, 2]
    assert first[0].prev_hash == second[0].prev_hash == audit.GENESIS
    assert first[1].prev_hash == first[0].entry_hash and second[1].prev_hash == second[0].entry_hash
    report = verify_audit_chain()
    assert (report.ok, report.checked, report.chains) == (True, 5, 2)
    assert AuditHead.objects.get(chain=keys.scope_key).seq == 3


def test_install_wide_entries_have_their_own_chain(two_spaces, system):
    tokens.create_token("ops", ["bot-a"], system)
    install = list(AuditEntry.objects.filter(chain=""))
    assert [(e.seq, e.scope_key) for e in install] == [(1, "")]
    assert verify_audit_chain().chains == 3


def test_moving_an_entry_to_another_chain_is_detected(two_spaces):
    keys, other_keys = two_spaces
    entry = _chain(keys)[-1]
    AuditEntry.objects.filter(pk=entry.pk).update(chain=other_keys.scope_key, seq=3)
    AuditHead.objects.filter(chain=keys.scope_key).update(seq=2, entry_hash=_chain(keys)[-1].entry_hash)
    AuditHead.objects.filter(chain=other_keys.scope_key).update(seq=3, entry_hash=entry.entry_hash)
    report = verify_audit_chain()
    assert not report.ok and report.chain == other_keys.scope_key and report.broken_seq == 3


def test_a_chain_cut_short_with_its_head_is_caught_by_the_checkpoint(two_spaces):
    keys, _ = two_spaces
    checkpoint = checkpoints.take()
    assert checkpoint is not None and checkpoint.chains == 2
    # Delete the space's newest entry and rewind its head to match: the chain alone looks whole.
    last = _chain(keys)[-1]
    last.delete()
    AuditHead.objects.filter(chain=keys.scope_key).update(seq=2, entry_hash=_chain(keys)[-1].entry_hash)
    report = verify_audit_chain()
    assert not report.ok and report.chain == keys.scope_key
    assert "a checkpoint recorded #3" in report.reason


def test_without_a_checkpoint_such_a_cut_is_not_seen(two_spaces):
    """The documented limit: entries after the newest checkpoint rest on their chain's head row."""
    keys, _ = two_spaces
    _chain(keys)[-1].delete()
    AuditHead.objects.filter(chain=keys.scope_key).update(seq=2, entry_hash=_chain(keys)[-1].entry_hash)
    assert verify_audit_chain().ok


def test_a_whole_chain_deleted_is_caught_by_the_checkpoint(two_spaces):
    _, other_keys = two_spaces
    checkpoints.take()
    AuditEntry.objects.filter(chain=other_keys.scope_key).delete()
    AuditHead.objects.filter(chain=other_keys.scope_key).delete()
    report = verify_audit_chain()
    assert not report.ok and report.chain == other_keys.scope_key and report.broken_seq == 1


def test_an_entry_replaced_at_a_checkpointed_position_is_detected(two_spaces, keys, system):
    checkpoints.take()
    AuditEntry.objects.filter(chain=keys.scope_key, seq=3).delete()
    AuditHead.objects.filter(chain=keys.scope_key).update(seq=2, entry_hash=_chain(keys)[-1].entry_hash)
    profiles.update_profile(keys, system, "speaker", "u9", notes="a different third entry")  # a real #3
    report = verify_audit_chain()
    assert not report.ok and report.broken_seq == 3 and "checkpoint recorded" in report.reason


def test_checkpoints_record_only_the_heads_that_moved(two_spaces, keys, system):
    first = checkpoints.take()
    assert checkpoints.take() is None  # nothing moved
    profiles.update_profile(keys, system, "speaker", "u0", notes="later")
    second = checkpoints.take()
    assert second is not None and second.seq == first.seq + 1 and second.prev_hash == first.checkpoint_hash
    assert second.chains == 2 and keys.scope_key in second.heads and str(second.heads).count("[") == 2
    report = verify_audit_chain()
    assert report.ok and report.checkpoints == 2


@pytest.mark.parametrize("tamper", ["root", "delete", "reorder"])
def test_a_tampered_checkpoint_is_detected(two_spaces, keys, system, tamper):
    checkpoints.take()
    profiles.update_profile(keys, system, "speaker", "u0", notes="later")
    checkpoints.take()
    if tamper == "root":
        AuditCheckpoint.objects.filter(seq=2).update(root="0" * 64)
    elif tamper == "delete":
        AuditCheckpoint.objects.filter(seq=1).delete()
    else:
        AuditCheckpoint.objects.filter(seq=1).update(seq=3)
        AuditCheckpoint.objects.filter(seq=2).update(seq=1)
        AuditCheckpoint.objects.filter(seq=3).update(seq=2)
    report = verify_audit_chain()
    assert not report.ok and report.reason.startswith("audit checkpoint #")


def test_the_health_check_takes_a_checkpoint_and_reports_the_chains(two_spaces):
    check = integrity.check_audit_chain()
    assert check.status == "OK" and "5 entries in 2 chains, anchored by 0 checkpoints" in check.detail
    assert AuditCheckpoint.objects.count() == 1
    assert "anchored by 1 checkpoint" in integrity.check_audit_chain().detail


def test_a_checkpoint_is_due_after_its_interval(two_spaces, settings, system):
    settings.MEMCONSOLE_AUDIT_CHECKPOINT_SECONDS = 3600
    assert checkpoints.take_if_due() is not None  # the first one is always due
    assert checkpoints.take_if_due() is None
    AuditCheckpoint.objects.update(created_at=AuditCheckpoint.objects.get().created_at.replace(year=2000))
    assert checkpoints.take_if_due() is None  # due, but no head moved
    keys, _ = two_spaces
    profiles.update_profile(keys, system, "speaker", "u0", notes="later")
    assert checkpoints.take_if_due() is not None


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite has one write lock for the whole database")
@pytest.mark.django_db(transaction=True)
def test_a_write_to_one_space_does_not_wait_for_another_spaces_open_transaction(keys, other_keys, system):
    """While a transaction holds one space's chain, another space appends and commits; only the
    same space's chain is locked."""
    profiles.update_profile(keys, system, "speaker", "u0", notes="this space exists")
    profiles.update_profile(other_keys, system, "speaker", "v0", notes="the other space exists")
    holding, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold_first_space() -> None:
        try:
            with transaction.atomic():
                profiles.update_profile(keys, system, "speaker", "u0", notes="held open")
                holding.set()
                release.wait(30)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=hold_first_space)
    worker.start()
    try:
        assert holding.wait(30)
        profiles.update_profile(other_keys, system, "speaker", "v1", notes="not waiting")  # would block before
        with transaction.atomic(), pytest.raises(DatabaseError):
            AuditHead.objects.select_for_update(nowait=True).get(chain=keys.scope_key)
    finally:
        release.set()
        worker.join(30)
    assert not errors
    assert [e.seq for e in _chain(other_keys)] == [1, 2] and [e.seq for e in _chain(keys)] == [1, 2]
    assert verify_audit_chain().ok


@pytest.mark.django_db(transaction=True)
def test_the_single_chain_of_an_older_install_verifies_after_the_migration(keys, other_keys, system):
    """Entries written before per-space chains (one global chain, `seq` across every space) stay in
    the install-wide chain with their hashes; new entries start per-space chains beside it."""
    executor = MigrationExecutor(connection)
    executor.migrate([("memory", "0018_episode_speaker_indexes")])
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM memory_auditentry")
            assert cursor.fetchone()[0] == 0
        old = MigrationExecutor(connection).loader.project_state(("memory", "0018_episode_speaker_indexes")).apps
        OldEntry, OldHead = old.get_model("memory", "AuditEntry"), old.get_model("memory", "AuditHead")
        previous = audit.GENESIS
        for seq, scope in enumerate([keys, other_keys, keys], start=1):
            entry = AuditEntry(  # hashed by today's code with chain "": what the old code computed
                seq=seq, audit_id=f"{seq:032x}", operation="remember", scope_key=scope.scope_key,
                user_key=scope.user_key, actor_type="system", actor="system:old", prev_hash=previous,
            )  # fmt: skip
            entry.set_payload(
                {"summary": f"old {seq}", "sender_name": "", "before": None, "after": None, "metadata": {}}
            )
            entry.payload_digest = audit.payload_digest(entry.payload)
            entry.entry_hash = audit.entry_hash(entry)
            fields = {f: getattr(entry, f) for f in audit.HASHED_FIELDS if f != "chain"}
            OldEntry.objects.create(
                **fields, entry_hash=entry.entry_hash, payload_stored=entry.payload_stored, encrypted=entry.encrypted
            )
            previous = entry.entry_hash
        OldHead.objects.create(pk=1, seq=3, entry_hash=previous)
    finally:
        MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    assert list(AuditEntry.objects.order_by("seq").values_list("chain", "seq")) == [("", 1), ("", 2), ("", 3)]
    assert AuditHead.objects.get(pk=1).chain == ""
    report = verify_audit_chain()
    assert (report.ok, report.checked, report.chains) == (True, 3, 1), str(report)
    entries_before = AuditEntry.objects.count()
    profiles.update_profile(keys, system, "speaker", "u0", notes="after the upgrade")
    new = AuditEntry.objects.exclude(chain="").get()
    assert (new.chain, new.seq, new.prev_hash) == (keys.scope_key, 1, audit.GENESIS)
    assert AuditEntry.objects.count() == entries_before + 1
    assert verify_audit_chain().ok
    AuditEntry.objects.filter(chain="", seq=2).delete()  # the old history is still guarded
    report = verify_audit_chain()
    assert not report.ok and (report.chain, report.broken_seq) == ("", 2)
