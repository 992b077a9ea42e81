"""Key rotation: every sealed field moves to the newest key, resumably, and the old key can go."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError

from memconsole.lib import crypto, vectors
from memconsole.memory import episodes, facts, injection, install, profiles, retrieval, window
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.botmemory_models import Fact, FactVersion, WindowMessage
from memconsole.memory.episode_extras import EpisodeMetadata
from memconsole.memory.models import AuditEntry, Episode, InjectionSnapshot, Profile, ProfileVersion
from memconsole.memory.reindex import reindex
from memconsole.memory.rotation import rotate_keys
from tests.processes import run_script

pytestmark = pytest.mark.django_db

BASE_DIR = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
SEALED = (
    Episode,
    EpisodeMetadata,
    Fact,
    FactVersion,
    WindowMessage,
    Profile,
    ProfileVersion,
    AuditEntry,
    InjectionSnapshot,
)


def new_key() -> str:
    return Fernet.generate_key().decode()


def fill(keys, system) -> None:
    """Rows in every sealed table: episodes, profiles and their versions, audit, a snapshot."""
    episodes.remember(keys, system, "I am planning a trip to Beijing next month", tags=["travel"], sender_id="u1")
    episodes.remember(keys, system, "我喜欢喝绿茶", tags=["drink"], sender_id="u2", metadata={"cup": "large"})
    facts.remember_fact(keys, system, "u2", "drink", "tea")  # issue 20: facts, their history, the window
    facts.remember_fact(keys, system, "u2", "drink", "green tea")
    window.append_message(keys, system, "user", "hello", sender_id="u2")
    profiles.update_profile(keys, system, "session", name="Travel group", add_traits=["plans ahead"])
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice", add_preferences=["short answers"])
    injection.record_injection(keys, system, "travel plans", sender_id="u1")


def readable_state() -> dict:
    """Everything sealed, decrypted (raises DecryptionError when a row does not open)."""
    return {
        "episodes": sorted(e.content for e in Episode.objects.all()),
        "profiles": sorted(json.dumps(p.payload, sort_keys=True) for p in Profile.objects.all()),
        "versions": sorted(json.dumps(v.payload, sort_keys=True) for v in ProfileVersion.objects.all()),
        "snapshots": sorted(json.dumps(s.payload, sort_keys=True) for s in InjectionSnapshot.objects.all()),
        "audit": [json.dumps(a.payload, sort_keys=True) for a in AuditEntry.objects.order_by("id")],
    }


def test_it_rotates_every_sealed_field_and_the_old_key_can_go(keys, system, settings):
    old = new_key()
    settings.MEMCONSOLE_FERNET_KEYS = [old]
    fill(keys, system)
    before = readable_state()
    rows = sum(model.objects.count() for model in SEALED)
    newest = new_key()
    settings.MEMCONSOLE_FERNET_KEYS = [newest, old]

    report = rotate_keys(batch=2)

    totals = report.totals()
    assert totals["unreadable"] == 0 and report.ok
    assert totals["rotated"] == rows  # every row written before; only the run's own start entry is skipped
    assert report.tables["audit_entries"].skipped == 1
    assert {name: t.rotated > 0 for name, t in report.tables.items()} == dict.fromkeys(report.tables, True)

    settings.MEMCONSOLE_FERNET_KEYS = [newest]  # the old key is gone
    after = readable_state()
    assert {k: v for k, v in after.items() if k != "audit"} == {k: v for k, v in before.items() if k != "audit"}
    assert after["audit"][: len(before["audit"])] == before["audit"]
    assert verify_audit_chain().ok
    assert all(crypto.is_under_newest_key(e.content_stored) for e in Episode.objects.all())
    assert "Beijing" in retrieval.recall(keys, "travel plans", top_k=1)[0].episode.content


def test_it_skips_rows_already_under_the_newest_key(keys, system, settings):
    settings.MEMCONSOLE_FERNET_KEYS = [new_key()]
    fill(keys, system)
    settings.MEMCONSOLE_FERNET_KEYS = [new_key(), *settings.MEMCONSOLE_FERNET_KEYS]
    rotate_keys()
    stored = {e.pk: e.content_stored for e in Episode.objects.all()}

    again = rotate_keys()

    assert again.totals()["rotated"] == 0 and again.totals()["encrypted"] == 0
    assert again.totals()["skipped"] == again.totals()["total"]
    assert {e.pk: e.content_stored for e in Episode.objects.all()} == stored


def test_it_encrypts_plain_rows_and_takes_tags_out_of_their_vectors(keys, system, settings):
    fill(keys, system)
    first = Episode.objects.order_by("pk").first()
    assert vectors.get(keys.user_key, [first.episode_id])[first.episode_id]["metadata"]["tags"] == "travel"
    before = readable_state()
    settings.MEMCONSOLE_FERNET_KEYS = [new_key()]

    report = rotate_keys()

    assert report.totals()["encrypted"] == sum(model.objects.count() for model in SEALED) - 2  # not its own entries
    assert report.vectors_pending == 0
    assert not any(model.objects.filter(encrypted=False).exists() for model in SEALED)
    assert "Beijing" not in Episode.objects.get(pk=first.pk).content_stored
    after = readable_state()
    assert after["episodes"] == before["episodes"] and after["profiles"] == before["profiles"]
    meta = vectors.get(keys.user_key, [first.episode_id])[first.episode_id]["metadata"]
    assert "tags" not in meta and meta["user_key"] == keys.user_key
    assert not Episode.objects.filter(vector_current=False).exists()
    assert reindex(check_only=True).drift == 0
    assert verify_audit_chain().ok


def test_it_leaves_rows_no_key_opens_alone_and_says_so(keys, system, settings, capsys):
    settings.MEMCONSOLE_FERNET_KEYS = [new_key()]
    written = episodes.remember(keys, system, "written under a key that is lost").episode
    settings.MEMCONSOLE_FERNET_KEYS = [new_key()]
    # rows from elsewhere (a restored table) beside an install the new key opens: its key check
    install.InstallState.objects.update(key_check=crypto.seal_text(install.KEY_CHECK)[0])

    report = rotate_keys()

    assert not report.ok
    assert report.tables["episodes"].unreadable == 1
    assert report.tables["episodes"].first_unreadable == written.pk
    assert Episode.objects.get(pk=written.pk).content_stored == written.content_stored
    with pytest.raises(CommandError, match="open with no configured key"):
        call_command("rotate_keys")
    assert f"first unreadable row: episodes #{written.pk}" in capsys.readouterr().out


def test_it_refuses_without_keys(db):
    with pytest.raises(ImproperlyConfigured, match="MEMCONSOLE_FERNET_KEYS"):
        rotate_keys()
    with pytest.raises(CommandError, match="MEMCONSOLE_FERNET_KEYS"):
        call_command("rotate_keys")
    assert not AuditEntry.objects.exists()


def test_it_audits_the_start_and_the_end_with_counts(keys, system, settings, capsys):
    settings.MEMCONSOLE_FERNET_KEYS = [new_key()]
    fill(keys, system)
    settings.MEMCONSOLE_FERNET_KEYS = [new_key(), *settings.MEMCONSOLE_FERNET_KEYS]

    call_command("rotate_keys", "--batch", "3")

    out, err = capsys.readouterr()  # progress on stderr, the result on stdout
    assert "episodes: 2/2" in err and "audit_entries: 3/" in err and "rotate_keys: " in out
    start, end = AuditEntry.objects.filter(operation__startswith="key_rotation").order_by("id")
    assert (start.operation, end.operation) == ("key_rotation_started", "key_rotation")
    assert start.actor == end.actor == "system:manage.py rotate_keys"
    metadata = end.payload["metadata"]
    assert metadata["tables"]["episodes"]["rotated"] == 2 and metadata["totals"]["unreadable"] == 0
    assert end.target_id == metadata["key_id"] == start.target_id
    assert settings.MEMCONSOLE_FERNET_KEYS[0] not in json.dumps(end.payload)


# --- killed half way ----------------------------------------------------------------------------

EPISODES = 6000
PLAIN = 40


def run_inspection(env: dict[str, str]) -> dict:
    done = run_script(SCRIPTS / "rotation_inspect.py", env, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_it_resumes_after_being_killed_half_way_without_loss_or_double_encryption(tmp_path):
    old, newest = new_key(), new_key()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memconsole.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'rotation.sqlite3'}",
        "MEMCONSOLE_VAR_DIR": str(tmp_path),
        "CHROMA_PATH": str(tmp_path / "chroma"),
        "CHROMA_HOST": "",
        "SECRET_KEY": "rotation-test-secret",
        "MEMCONSOLE_AUDIT_KEY": "",
        "PYTHONUNBUFFERED": "1",
        "MEMCONSOLE_FERNET_KEYS": old,
    }
    manage = [sys.executable, str(BASE_DIR / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], env=env, cwd=BASE_DIR, check=True, timeout=120)
    seeded = run_script(SCRIPTS / "rotation_seed.py", env, {"episodes": EPISODES, "plain": PLAIN}, timeout=120)
    assert seeded.returncode == 0, seeded.stderr
    env["MEMCONSOLE_FERNET_KEYS"] = f"{newest},{old}"

    rotation = subprocess.Popen(
        [*manage, "rotate_keys", "--batch", "20"], env=env, cwd=BASE_DIR, stderr=subprocess.PIPE, text=True
    )
    try:
        for line in rotation.stderr:  # progress goes to stderr only
            if line.startswith("episodes: ") and int(line.split()[1].split("/")[0]) >= 200:
                break
        rotation.send_signal(signal.SIGKILL)
    finally:
        rotation.wait(timeout=60)
        rotation.stderr.close()
    assert rotation.returncode == -signal.SIGKILL

    half = run_inspection(env)
    assert half["bad"] == []
    assert 200 <= half["newest"] < half["rows"] - 1, "the rotation was not interrupted half way"
    assert half["other"] > 0 and half["plain"] > 0
    assert half["operations"] == ["key_rotation_started"]

    resumed = subprocess.run(
        [*manage, "rotate_keys", "--batch", "500"], env=env, cwd=BASE_DIR, capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = resumed.stdout.strip().splitlines()[-1]
    assert "0 unreadable" in summary

    env["MEMCONSOLE_FERNET_KEYS"] = newest  # the old key is removed
    final = run_inspection(env)
    assert final["bad"] == []
    # + the resumed run's start and end entries, and its entries recording the seeded rows' state
    assert final["baselines"] > half["baselines"]
    assert final["rows"] == half["rows"] + 2 + final["baselines"] - half["baselines"]
    assert final["newest"] == final["rows"] and final["plain"] == 0 and final["other"] == 0
    assert final["chain"].startswith("audit chain OK")
    assert final["operations"] == ["key_rotation_started", "key_rotation_started", "key_rotation"]


def test_it_refuses_a_batch_size_the_database_cannot_hold_with_a_clear_error(db):
    # `--batch 9223372036854775808` ended in a 21-frame traceback (IntegrityError: datatype mismatch)
    with pytest.raises(CommandError, match="--batch must be between 1 and 100000"):
        call_command("rotate_keys", "--batch", "9223372036854775808")
