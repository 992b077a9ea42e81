"""An encrypted install refuses keys that open none of its data (found by a bot developer: a
process started with another valid Fernet key answered ready, stored new episodes, audit entries and
tokens under it, and left the install failing its audit and encryption checks once the right key
was back). The install keeps a key check sealed with its newest key; keys that do not open it read
and write nothing, the way a missing key does."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core import checks
from django.core.management import call_command
from django.core.management.base import CommandError

from memconsole.memory import episodes, errors, install, tokens
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.health.readiness import encryption_key_problem
from memconsole.memory.models import AuditEntry, Episode
from memconsole.memory.rotation import rotate_keys

pytestmark = pytest.mark.django_db


def new_key() -> str:
    return Fernet.generate_key().decode()


@pytest.fixture
def right_key(settings, keys, system) -> str:
    key = new_key()
    settings.MEMCONSOLE_FERNET_KEYS = [key]
    episodes.remember(keys, system, "a secret written under the right key")
    return key


def test_a_wrong_key_writes_nothing_and_says_which_setting(settings, right_key, keys, system):
    rows, entries = Episode.objects.count(), AuditEntry.objects.count()
    settings.MEMCONSOLE_FERNET_KEYS = [new_key()]

    with pytest.raises(errors.EncryptionKeyMissing, match="None of the keys in MEMCONSOLE_FERNET_KEYS opens") as raised:
        episodes.remember(keys, system, "must not be sealed under a key that cannot read the rest")
    assert raised.value.code == "encryption_key_missing"
    with pytest.raises(errors.EncryptionKeyMissing):
        tokens.create_token("bot", ["bot-a"], system)
    with pytest.raises(CommandError, match="None of the keys"):
        call_command("rotate_keys")
    assert (Episode.objects.count(), AuditEntry.objects.count()) == (rows, entries)
    assert "None of the keys" in (encryption_key_problem() or "")
    assert any(m.id == "memconsole.E001" and "None of the keys" in m.msg for m in checks.run_checks())

    settings.MEMCONSOLE_FERNET_KEYS = [right_key]
    assert encryption_key_problem() is None and verify_audit_chain().ok
    assert episodes.remember(keys, system, "written with the right key again").episode.encrypted


def test_a_new_key_beside_the_old_one_and_a_rotation_let_the_old_key_go(settings, right_key, keys, system):
    newer = new_key()
    settings.MEMCONSOLE_FERNET_KEYS = [newer, right_key]
    episodes.remember(keys, system, "written under the newer key")
    assert rotate_keys().ok

    settings.MEMCONSOLE_FERNET_KEYS = [newer]  # the rotation sealed the key check under the newest key
    assert encryption_key_problem() is None
    assert episodes.remember(keys, system, "the old key is gone").episode.encrypted


def test_an_install_encrypted_before_key_checks_gets_one_only_from_keys_that_open_it(settings, right_key, keys, system):
    install.InstallState.objects.update(key_check="")
    install.InstallState.forget_cache()
    settings.MEMCONSOLE_FERNET_KEYS = [new_key()]
    with pytest.raises(errors.EncryptionKeyMissing):
        episodes.remember(keys, system, "refused: the keys open none of the stored rows")
    assert install.InstallState.objects.get().key_check == ""

    settings.MEMCONSOLE_FERNET_KEYS = [right_key]
    episodes.remember(keys, system, "the right key opens them: the check is recorded")
    assert install.InstallState.objects.get().key_check
