"""An encrypted install refuses to run without its key (issue 15): the install records that it is
encrypted, and without MEMCONSOLE_FERNET_KEYS nothing is read, nothing is written in plaintext, and
`manage.py check` fails, naming the setting."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memconsole.memory import episodes, errors, install, profiles
from memconsole.memory.models import Episode, Profile

pytestmark = pytest.mark.django_db


@pytest.fixture
def encrypted_install(settings, keys, system) -> str:
    """One episode written under a key, then the key taken away (a restart with the setting empty);
    returns the key."""
    key = Fernet.generate_key().decode()
    settings.MEMCONSOLE_FERNET_KEYS = [key]
    episodes.remember(keys, system, "a secret written under the key")
    settings.MEMCONSOLE_FERNET_KEYS = []
    return key


def test_it_records_the_install_as_encrypted_the_first_time_a_row_is_sealed(settings, keys, system):
    assert not install.InstallState.is_encrypted()
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]

    episodes.remember(keys, system, "the first sealed row")

    assert install.InstallState.objects.get().encrypted_since is not None
    assert install.InstallState.is_encrypted()


def test_it_refuses_to_write_an_episode_in_plaintext_without_the_key(encrypted_install, keys, system):
    with pytest.raises(errors.Unavailable, match="MEMCONSOLE_FERNET_KEYS") as raised:
        episodes.remember(keys, system, "this must never be stored in plaintext")

    assert raised.value.code == "encryption_key_missing"
    assert isinstance(raised.value, errors.EncryptionKeyMissing)
    assert not Episode.objects.filter(encrypted=False).exists()


def test_it_refuses_to_write_a_profile_in_plaintext_without_the_key(encrypted_install, keys, system):
    with pytest.raises(errors.EncryptionKeyMissing):
        profiles.update_profile(keys, system, "speaker", "u1", notes="plaintext notes")

    assert not Profile.objects.exists()


def test_it_refuses_a_plaintext_write_once_another_process_marked_the_install(keys, system):
    assert not install.InstallState.is_encrypted()  # nothing cached here says otherwise
    install.InstallState.objects.update_or_create(pk=1, defaults={"encrypted_since": "2026-01-01T00:00:00Z"})

    with pytest.raises(errors.EncryptionKeyMissing):
        episodes.remember(keys, system, "written while another process holds the key")


def test_it_still_stores_plaintext_on_an_install_that_never_had_keys(keys, system):
    made = episodes.remember(keys, system, "a plain install stays plain")

    assert not made.episode.encrypted
    assert not install.InstallState.is_encrypted()
    install.InstallState.require_key()  # nothing to refuse


def test_it_needs_nothing_more_with_the_key(settings, encrypted_install, keys, system):
    settings.MEMCONSOLE_FERNET_KEYS = [encrypted_install]

    install.InstallState.require_key()
    assert episodes.remember(keys, system, "sealed again").episode.encrypted


def test_it_fails_the_system_check_naming_the_setting(encrypted_install):
    found = [message for message in checks.run_checks() if message.id == "memconsole.E001"]

    assert len(found) == 1
    assert found[0].level == checks.ERROR
    assert "MEMCONSOLE_FERNET_KEYS" in found[0].msg
    with pytest.raises(SystemCheckError, match="MEMCONSOLE_FERNET_KEYS"):
        call_command("check")


def test_it_passes_the_system_check_on_a_plain_install():
    assert not [message for message in checks.run_checks() if message.id == "memconsole.E001"]


@pytest.mark.django_db(transaction=True)
def test_it_records_an_upgraded_install_that_already_holds_encrypted_rows():
    before, after = [("memory", "0006_installstate")], [("memory", "0007_installstate_from_encrypted_rows")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    old.get_model("memory", "InstallState").objects.all().delete()
    old.get_model("memory", "Profile").objects.create(scope_key="s", type="session", payload_stored="x", encrypted=True)

    executor = MigrationExecutor(connection)
    executor.migrate(after)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert install.InstallState.objects.get().encrypted_since is not None
