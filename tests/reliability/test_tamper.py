"""Tamper evidence end to end (issue 15): a forged row answers a clear error in the API and the
console (never a 500), the whole health run reports it by name, and a missing audit or Fernet key
reads as a missing key, not as a broken chain."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.test import Client
from django.urls import reverse

from memconsole.memory import episodes, health, tokens
from memconsole.memory.audit import Actor
from memconsole.memory.health import integrity
from memconsole.memory.install import InstallState
from memconsole.memory.models import AuditEntry, Episode, Profile, Scope
from tests import factories
from tests.api.conftest import SCOPE_A

pytestmark = pytest.mark.django_db


@pytest.fixture
def fernet_keys(settings):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]


@pytest.fixture
def token_a():
    return tokens.create_token("bot a", ["bot-a"], Actor.system("tests"))


@pytest.fixture
def forged(keys, other_keys, system, fernet_keys):
    """bot-a's episode holding bot-b's ciphertext, and bot-a's profile holding bot-b's payload."""
    victim = episodes.remember(keys, system, "I am planning a trip to Beijing next month").episode
    source = episodes.remember(other_keys, system, "I am planning a trip to the bank vault").episode
    Episode.objects.filter(pk=victim.pk).update(content_stored=source.content_stored)
    profile = factories.profile(keys, name="chat A")
    other = factories.profile(other_keys, name="chat B")
    Profile.objects.filter(pk=profile.pk).update(payload_stored=other.payload_stored)
    return victim


def test_the_api_answers_a_forged_row_with_a_clear_error(forged, token_a):
    client, auth = Client(), {"Authorization": f"Bearer {token_a[1]}"}

    recalled = client.post(
        "/api/v1/recall", {**SCOPE_A, "query": "trip to Beijing"}, content_type="application/json", headers=auth
    )
    profile = client.get("/api/v1/profile", {**SCOPE_A, "type": "session"}, headers=auth)

    for response in (recalled, profile):
        assert response.status_code == 503, response.content
        error = response.json()["error"]
        assert error["code"] == "row_integrity" and "outside memconsole" in error["message"]


def test_the_mcp_tools_answer_a_forged_row_with_the_apis_code(forged, token_a):
    """The MCP tool error carries the API's code (row_integrity), not a generic "unavailable"."""
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "recall", "arguments": {**SCOPE_A, "query": "trip to Beijing"}},
    }
    headers = {"Authorization": f"Bearer {token_a[1]}", "Accept": "application/json, text/event-stream"}
    response = Client().post("/mcp", call, content_type="application/json", headers=headers)

    assert response.status_code == 200, response.content
    result = response.json()["result"]
    assert result["isError"] is True
    error = result["structuredContent"]["error"]
    assert error["code"] == "row_integrity" and "outside memconsole" in error["message"]


def test_the_console_answers_a_forged_row_with_a_clear_page(forged, keys, viewer_client):
    scope = Scope.objects.get(scope_key=keys.scope_key)

    for path in (
        reverse("console:episode_detail", args=(scope.pk, forged.episode_id)),
        reverse("console:episodes", args=(scope.pk,)),
    ):
        response = viewer_client.get(path)
        assert response.status_code == 503, path
        assert "outside memconsole" in response.content.decode()


def test_the_health_run_names_the_forged_rows(forged, system):
    result = health.run_health_check(system)

    rows = {check["id"]: check for check in result["checks"]}["row_integrity"]
    assert result["status"] == "ERROR" and rows["status"] == "ERROR"
    assert f"episode {forged.episode_id}" in rows["detail"] and "session profile #" in rows["detail"]
    assert "2 rows were changed outside memconsole" in rows["detail"]


# --- a missing key is not a broken chain --------------------------------------------------------


@pytest.fixture
def chain(keys, system, settings):
    settings.MEMCONSOLE_AUDIT_KEY = "the-audit-key-the-chain-was-written-with"
    episodes.remember(keys, system, "one")
    episodes.remember(keys, system, "two")
    assert integrity.check_audit_chain().status == "OK"  # a health check records the key's fingerprint
    return settings


@pytest.mark.parametrize("recorded", [True, False], ids=["fingerprint recorded", "older chain, no fingerprint"])
def test_a_missing_audit_key_reads_as_a_missing_key(chain, recorded):
    if not recorded:
        InstallState.objects.update(audit_key_id="")
    chain.MEMCONSOLE_AUDIT_KEY = ""

    check = integrity.check_audit_chain()

    assert check.status == "ERROR"
    assert "MEMCONSOLE_AUDIT_KEY is not set" in check.detail and "not a broken chain" in check.detail
    assert "broken at entry" not in check.detail and "MEMCONSOLE_AUDIT_KEY" in check.fix


def test_a_changed_audit_key_reads_as_a_wrong_key(chain):
    chain.MEMCONSOLE_AUDIT_KEY = "another-key"

    check = integrity.check_audit_chain()

    assert "is set to another key" in check.detail and "not a broken chain" in check.detail


def test_a_broken_chain_still_reads_as_broken(chain):
    entry = AuditEntry.objects.order_by("id")[1]
    AuditEntry.objects.filter(pk=entry.pk).update(operation="archive")

    check = integrity.check_audit_chain()

    assert f"audit chain broken at entry #{entry.seq}" in check.detail and "key" not in check.detail


@pytest.mark.parametrize("keys_then", ["none", "another"])
def test_a_missing_fernet_key_reads_as_a_missing_key(keys, system, settings, keys_then):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    episodes.remember(keys, system, "one")
    settings.MEMCONSOLE_FERNET_KEYS = [] if keys_then == "none" else [Fernet.generate_key().decode()]

    check = integrity.check_audit_chain()

    assert check.status == "ERROR" and "MEMCONSOLE_FERNET_KEYS" in check.detail
    assert "not a broken chain" in check.detail and "broken at entry" not in check.detail


def test_an_audit_payload_copied_into_another_entry_reads_as_broken(keys, system, fernet_keys):
    episodes.remember(keys, system, "one")
    episodes.remember(keys, system, "two")
    first, second = AuditEntry.objects.order_by("id")[:2]
    AuditEntry.objects.filter(pk=second.pk).update(payload_stored=first.payload_stored)

    check = integrity.check_audit_chain()

    assert f"broken at entry #{second.seq}" in check.detail and "another audit" in check.detail
