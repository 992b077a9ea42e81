"""Encryption at rest: round trip, nothing readable in the database file or the index, clear errors, rotation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet, InvalidToken
from django.core.exceptions import ImproperlyConfigured

from memconsole.lib import crypto, vectors
from memconsole.memory import episodes, injection, profiles, retrieval
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.models import AuditEntry, Episode, InjectionSnapshot, Profile, ProfileVersion
from tests.chroma_server import server_mode
from tests.conftest import MODEL_DIR
from tests.processes import run_script

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def _key() -> str:
    return Fernet.generate_key().decode()


# --- the primitives ----------------------------------------------------------------------------------


def test_it_stores_text_as_is_without_keys(settings):
    settings.MEMCONSOLE_FERNET_KEYS = []
    assert crypto.seal_text("hello") == ("hello", False)
    assert crypto.open_text("hello", False) == "hello"
    assert not crypto.enabled()


def test_it_round_trips_text_under_a_key(fernet_keys):
    stored, encrypted = crypto.seal_text("我喜欢喝绿茶 — green tea")
    assert encrypted and "绿茶" not in stored and "green" not in stored
    assert crypto.open_text(stored, True) == "我喜欢喝绿茶 — green tea"
    assert Fernet(fernet_keys.encode()).decrypt(stored.encode()).decode() == "我喜欢喝绿茶 — green tea"


def test_it_refuses_encrypted_data_without_keys_naming_the_setting(settings):
    settings.MEMCONSOLE_FERNET_KEYS = [_key()]
    stored, _ = crypto.seal_text("secret")
    settings.MEMCONSOLE_FERNET_KEYS = []
    with pytest.raises(crypto.DecryptionError, match="MEMCONSOLE_FERNET_KEYS"):
        crypto.open_text(stored, True)


def test_it_refuses_encrypted_data_under_a_wrong_key_naming_the_setting(settings):
    settings.MEMCONSOLE_FERNET_KEYS = [_key()]
    stored, _ = crypto.seal_text("secret")
    settings.MEMCONSOLE_FERNET_KEYS = [_key()]
    with pytest.raises(crypto.DecryptionError, match="MEMCONSOLE_FERNET_KEYS"):
        crypto.open_text(stored, True)


@pytest.mark.parametrize("stored", ["not a token", "", "gAAAAA" + "x" * 80, "ünïcode"])
def test_it_refuses_a_damaged_token_rather_than_returning_garbage(fernet_keys, stored):
    with pytest.raises(crypto.DecryptionError):
        crypto.open_text(stored, True)


def test_it_refuses_a_malformed_key_naming_the_setting(settings):
    settings.MEMCONSOLE_FERNET_KEYS = [_key(), "too-short"]
    with pytest.raises(ImproperlyConfigured, match=r"MEMCONSOLE_FERNET_KEYS: key #2"):
        crypto.seal_text("x")


def test_it_encrypts_with_the_newest_key_and_decrypts_with_every_key(settings):
    old, new = _key(), _key()
    settings.MEMCONSOLE_FERNET_KEYS = [old]
    under_old, _ = crypto.seal_text("written last year")
    assert crypto.is_under_newest_key(under_old)

    settings.MEMCONSOLE_FERNET_KEYS = [new, old]  # newest first
    under_new, _ = crypto.seal_text("written today")
    Fernet(new.encode()).decrypt(under_new.encode())  # the newest key encrypts
    with pytest.raises(InvalidToken):
        Fernet(old.encode()).decrypt(under_new.encode())
    assert crypto.open_text(under_old, True) == "written last year"  # old data still opens
    assert crypto.open_text(under_new, True) == "written today"
    assert not crypto.is_under_newest_key(under_old)
    assert crypto.is_under_newest_key(under_new)

    rotated, encrypted = crypto.rotate_text(under_old, True)
    assert encrypted and crypto.is_under_newest_key(rotated)
    settings.MEMCONSOLE_FERNET_KEYS = [new]  # the old key can go once everything is rotated
    assert crypto.open_text(rotated, True) == "written last year"


@pytest.mark.parametrize("stored", ["not a token", "ünïcode"])
def test_it_refuses_to_rotate_a_damaged_token(fernet_keys, stored):
    with pytest.raises(crypto.DecryptionError, match="MEMCONSOLE_FERNET_KEYS"):
        crypto.rotate_text(stored, True)


def test_it_rotates_a_plain_value_into_an_encrypted_one(fernet_keys):
    stored, encrypted = crypto.rotate_text("plain before keys", False)
    assert encrypted and crypto.open_text(stored, True) == "plain before keys"


def test_it_needs_keys_to_rotate(settings):
    settings.MEMCONSOLE_FERNET_KEYS = []
    with pytest.raises(ImproperlyConfigured, match="MEMCONSOLE_FERNET_KEYS"):
        crypto.rotate_text("x", False)


# --- through the operations -----------------------------------------------------------------------------

# Needles are searched in binary files holding base64 ciphertext: none may be short or purely
# alphanumeric, or it turns up there by chance (a bare "4821" did, once in a while).
SECRET = "Zebra-sentinel: my bank PIN is 4821"
NOTE = "Okapi-sentinel notes about Alice"
TRAIT = "Quokka-sentinel trait"
TAG = "narwhal-tag"


def _write_everything(keys, system):
    episode = episodes.remember(keys, system, SECRET, tags=[TAG], sender_id="u1", sender_name="Alice").episode
    profiles.update_profile(keys, system, "speaker", "u1", notes=NOTE, add_traits=[TRAIT])
    injection.record_injection(keys, system, "what is my PIN", sender_id="u1")
    return episode


@pytest.mark.django_db
def test_it_round_trips_everything_encrypted(fernet_keys, keys, system):
    episode = _write_everything(keys, system)

    row = Episode.objects.get(pk=episode.pk)
    assert row.encrypted and SECRET not in row.content_stored
    assert row.content == SECRET
    for model in (Profile, ProfileVersion, AuditEntry, InjectionSnapshot):
        for item in model.objects.all():
            assert item.encrypted, model.__name__
            assert "sentinel" not in item.payload_stored and TAG not in item.payload_stored
    assert Profile.objects.get().payload["notes"] == NOTE
    assert AuditEntry.objects.get(operation="remember").payload["after"]["content"] == SECRET
    snapshot = InjectionSnapshot.objects.get()
    assert snapshot.payload["episodes"][0]["content"] == SECRET
    assert SECRET in snapshot.payload["system_blocks"][-1]
    assert [h.episode.content for h in retrieval.recall(keys, "bank PIN")] == [SECRET]
    assert verify_audit_chain().ok
    # the index holds no tags when encryption is on (and never content)
    meta = vectors.get(keys.user_key, [episode.episode_id])[episode.episode_id]["metadata"]
    assert "tags" not in meta and SECRET not in str(meta)


def _files_containing(folder: Path, needles: list[bytes]) -> dict[bytes, list[str]]:
    found: dict[bytes, list[str]] = {}
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for needle in needles:
                if needle in data:
                    found.setdefault(needle, []).append(path.name)
    return found


@pytest.mark.skipif(
    server_mode(), reason="reads the embedded index's folder; a Chroma server keeps its files on its host"
)
@pytest.mark.django_db
def test_it_leaves_no_plaintext_in_the_chroma_folder(fernet_keys, keys, system, settings):
    _write_everything(keys, system)
    vectors.reset_client()  # let Chroma flush and close its files
    needles = [s.encode() for s in (SECRET, NOTE, TRAIT, TAG, "Zebra-sentinel", "PIN is 4821")]
    assert _files_containing(Path(settings.CHROMA_PATH), needles) == {}


@pytest.mark.django_db
def test_it_refuses_to_read_without_the_key_and_never_returns_garbage(fernet_keys, keys, system, settings):
    episode = _write_everything(keys, system)
    for keys_now in ([], [_key()]):
        settings.MEMCONSOLE_FERNET_KEYS = keys_now
        with pytest.raises(crypto.DecryptionError, match="MEMCONSOLE_FERNET_KEYS"):
            _ = episodes.get_episode(keys, episode.episode_id).content
        with pytest.raises(crypto.DecryptionError, match="MEMCONSOLE_FERNET_KEYS"):
            profiles.get_profile(keys, "speaker", "u1")
        with pytest.raises(crypto.DecryptionError, match="MEMCONSOLE_FERNET_KEYS"):
            _ = InjectionSnapshot.objects.get().payload
        report = verify_audit_chain()
        assert not report.ok and "MEMCONSOLE_FERNET_KEYS" in report.reason
    settings.MEMCONSOLE_FERNET_KEYS = [fernet_keys]
    assert episodes.get_episode(keys, episode.episode_id).content == SECRET


# --- the database file itself, written by a separate process ----------------------------------------------


def _manage(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=180
    )


def test_it_leaves_no_plaintext_in_the_sqlite_database_file(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{data / 'memconsole.sqlite3'}",
        "CHROMA_PATH": str(tmp_path / "chroma"),
        "CHROMA_HOST": "",
        "MEMCONSOLE_MODEL_DIR": str(MODEL_DIR),
        "MEMCONSOLE_FERNET_KEYS": f"{_key()},{_key()}",
        "MEMCONSOLE_VAR_DIR": str(tmp_path / "var"),
        "SECRET_KEY": "crypto-test-secret-key",
        "MEMCONSOLE_ENV": "local",
    }
    migrated = _manage(["migrate", "--noinput", "-v", "0"], env)
    assert migrated.returncode == 0, migrated.stderr
    run = run_script(
        SCRIPTS / "crypto_write.py", env, {"secret": SECRET, "tag": TAG, "note": NOTE, "trait": TRAIT}, timeout=180
    )
    assert run.returncode == 0, run.stderr
    assert "written" in run.stdout

    files = sorted(p.name for p in data.iterdir())
    assert "memconsole.sqlite3" in files
    # Tags, sender ids and names stay in clear in the episode table (filters and indexes use them);
    # content, profiles, audit payloads and snapshots must not appear anywhere in the files.
    found = _files_containing(
        data, [s.encode() for s in (SECRET, NOTE, TRAIT, "Zebra-sentinel", "Okapi-sentinel", "PIN is 4821")]
    )
    assert found == {}, f"plaintext found in {found}"
    # the search does see what was stored without a key (database file or its WAL)
    assert _files_containing(data, [b"CONTROL-plaintext-canary"]), files
    assert _files_containing(tmp_path / "chroma", [s.encode() for s in (SECRET, NOTE, TAG)]) == {}
