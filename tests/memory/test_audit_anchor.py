"""The newest audit checkpoint kept outside the database (MEMCONSOLE_AUDIT_ANCHOR): someone who can
rewrite the database but not this machine's files can no longer delete the newest checkpoints, or
all of them, together with what they anchored, unseen (docs/design.md §6)."""

from __future__ import annotations

import json
import logging

import pytest
from django.core.management import CommandError, call_command

from memconsole.memory import checkpoints, profiles
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.health import integrity
from memconsole.memory.models import AuditCheckpoint, AuditEntry, AuditHead, CheckpointHead

pytestmark = pytest.mark.django_db


@pytest.fixture
def anchor(settings, tmp_path):
    path = tmp_path / "anchor" / "audit-anchor.json"
    settings.MEMCONSOLE_AUDIT_ANCHOR = str(path)
    return path


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Run `fn` with its on-commit callbacks executed, as a committed transaction would."""

    def run(fn, *args):
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args)

    return run


def write(keys, system, n: int) -> None:
    for i in range(n):
        profiles.update_profile(keys, system, "speaker", f"u{i}", notes=f"note {i}")


def erase_everything_of(keys) -> None:
    """What someone with database access does to hide a space: its chain, its head, every checkpoint."""
    AuditEntry.objects.filter(chain=keys.scope_key).delete()
    AuditHead.objects.filter(chain=keys.scope_key).delete()
    AuditCheckpoint.objects.all().delete()
    CheckpointHead.objects.all().delete()


def test_a_committed_checkpoint_is_kept_in_the_file(keys, system, anchor, committed):
    write(keys, system, 2)
    checkpoint = committed(checkpoints.take)

    assert json.loads(anchor.read_text())["seq"] == checkpoint.seq
    assert json.loads(anchor.read_text())["checkpoint_hash"] == checkpoint.checkpoint_hash
    assert verify_audit_chain().ok


def test_every_checkpoint_deleted_with_a_whole_chain_is_detected(keys, other_keys, system, anchor, committed):
    write(keys, system, 3)
    write(other_keys, system, 1)
    committed(checkpoints.take)
    erase_everything_of(keys)

    report = verify_audit_chain()

    assert not report.ok and "audit checkpoint #1" in report.reason and "is missing" in report.reason
    assert "--reanchor" in report.reason
    assert integrity.check_audit_chain().status == "ERROR"


def test_without_the_file_that_deletion_is_not_seen(keys, other_keys, system, settings, committed):
    """The limit the file lifts (MEMCONSOLE_AUDIT_ANCHOR off, as in development by default)."""
    settings.MEMCONSOLE_AUDIT_ANCHOR = ""
    write(keys, system, 3)
    write(other_keys, system, 1)
    committed(checkpoints.take)
    erase_everything_of(keys)

    assert verify_audit_chain().ok


def test_the_newest_checkpoints_deleted_with_what_they_anchored_are_detected(keys, system, anchor, committed):
    write(keys, system, 2)
    committed(checkpoints.take)
    profiles.update_profile(keys, system, "speaker", "u9", notes="hidden later")
    committed(checkpoints.take)
    # Cut the chain back to what checkpoint #1 anchored, and drop checkpoint #2: the database agrees.
    AuditCheckpoint.objects.filter(seq=2).delete()
    first = json.loads(AuditCheckpoint.objects.get(seq=1).heads)
    chain, seq, entry_hash = first[0]
    AuditEntry.objects.filter(chain=chain, seq__gt=seq).delete()
    AuditHead.objects.filter(chain=chain).update(seq=seq, entry_hash=entry_hash)
    CheckpointHead.objects.filter(chain=chain).update(seq=seq, entry_hash=entry_hash)

    report = verify_audit_chain()

    assert not report.ok and "audit checkpoint #2" in report.reason


def test_a_replaced_checkpoint_is_detected(keys, system, anchor, committed):
    write(keys, system, 1)
    committed(checkpoints.take)
    AuditCheckpoint.objects.filter(seq=1).update(checkpoint_hash="0" * 64)

    assert not verify_audit_chain().ok


def test_an_unreadable_file_is_reported(keys, system, anchor, committed):
    write(keys, system, 1)
    committed(checkpoints.take)
    anchor.write_text("{not json")

    report = verify_audit_chain()

    assert not report.ok and "unreadable" in report.reason and str(anchor) in report.reason


def test_an_older_checkpoint_never_replaces_a_newer_one(keys, system, anchor, committed):
    write(keys, system, 1)
    first = committed(checkpoints.take)
    profiles.update_profile(keys, system, "speaker", "u5", notes="later")
    second = committed(checkpoints.take)

    checkpoints.keep_outside(first)  # a slower process committing an older one last

    assert json.loads(anchor.read_text())["seq"] == second.seq


def test_a_file_that_cannot_be_written_is_logged_and_the_checkpoint_kept(
    keys, system, settings, tmp_path, committed, caplog
):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    settings.MEMCONSOLE_AUDIT_ANCHOR = str(blocker / "audit-anchor.json")  # its folder is a file
    write(keys, system, 1)

    with caplog.at_level(logging.ERROR, logger="memconsole.audit"):
        checkpoint = committed(checkpoints.take)

    assert checkpoint is not None and AuditCheckpoint.objects.filter(seq=checkpoint.seq).exists()
    assert "could not be written" in caplog.text


def test_reanchor_after_a_deliberate_restore(keys, system, anchor, committed, capsys):
    write(keys, system, 1)
    committed(checkpoints.take)
    profiles.update_profile(keys, system, "speaker", "u5", notes="after the backup")
    committed(checkpoints.take)
    # Restore "the backup" taken between the two checkpoints.
    AuditCheckpoint.objects.filter(seq=2).delete()
    chain, seq, entry_hash = json.loads(AuditCheckpoint.objects.get(seq=1).heads)[0]
    AuditEntry.objects.filter(chain=chain, seq__gt=seq).delete()
    AuditHead.objects.filter(chain=chain).update(seq=seq, entry_hash=entry_hash)
    CheckpointHead.objects.filter(chain=chain).update(seq=seq, entry_hash=entry_hash)
    assert not verify_audit_chain().ok

    call_command("audit_checkpoint", "--reanchor")

    assert json.loads(anchor.read_text())["seq"] == 1
    assert "now keeps audit checkpoint #1" in capsys.readouterr().out
    entry = AuditEntry.objects.get(operation="audit_reanchored")
    assert entry.payload["metadata"]["replaced_seq"] == 2
    assert verify_audit_chain().ok


def test_reanchor_needs_the_setting_and_a_checkpoint(settings, anchor):
    with pytest.raises(CommandError, match="no audit checkpoint yet"):
        call_command("audit_checkpoint", "--reanchor")
    settings.MEMCONSOLE_AUDIT_ANCHOR = ""
    with pytest.raises(CommandError, match="MEMCONSOLE_AUDIT_ANCHOR is not set"):
        call_command("audit_checkpoint", "--reanchor")
