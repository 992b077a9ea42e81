"""Without its key an encrypted install shows one clear console page naming the setting (issue 15)."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from memconsole.memory import episodes
from memconsole.memory.install import InstallState
from memconsole.memory.models import Episode, Scope

from .conftest import htmx

pytestmark = pytest.mark.django_db


@pytest.fixture
def encrypted_install(settings, keys, system, client, django_capture_on_commit_callbacks):
    """An episode written under a key, the key taken away, and the process's readiness probe run
    (as an orchestrator does at start): from then on the process knows the install is encrypted."""
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    made = episodes.remember(keys, system, "a secret written under the key")
    settings.MEMCONSOLE_FERNET_KEYS = []
    with django_capture_on_commit_callbacks(execute=True):
        assert client.get("/readyz").status_code == 503
    yield made.episode
    InstallState.forget_cache()  # the test's transaction is rolled back: so is the flag


@pytest.mark.parametrize("name", ["overview", "diagnostics"])
def test_it_shows_one_page_naming_the_setting(viewer_client, encrypted_install, url, name):
    response = viewer_client.get(url(name))

    assert response.status_code == 503
    page = response.content.decode()
    assert "MEMCONSOLE_FERNET_KEYS" in page
    assert "encrypted" in page
    assert "a secret" not in page


def test_it_shows_it_inside_a_scope_and_as_a_fragment(viewer_client, encrypted_install, url, keys):
    scope = Scope.objects.get(scope_key=keys.scope_key)

    response = viewer_client.get(url("episodes", scope.pk), **htmx())

    assert response.status_code == 503
    assert "MEMCONSOLE_FERNET_KEYS" in response.content.decode()
    assert "<html" not in response.content.decode()


def test_it_refuses_a_console_write(operator_client, encrypted_install, url, keys):
    scope = Scope.objects.get(scope_key=keys.scope_key)
    response = operator_client.post(url("episode_archive", scope.pk, encrypted_install.episode_id))

    assert response.status_code == 503
    assert Episode.objects.get(pk=encrypted_install.pk).status == encrypted_install.status
