"""Without its key an encrypted install answers every API read and write with 503
`encryption_key_missing`, writes nothing, and /readyz says why (issue 15)."""

from __future__ import annotations

import json

import pytest
from cryptography.fernet import Fernet

from memconsole.memory import episodes

from .conftest import SCOPE_A, memory_rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def encrypted_install(settings, keys, system) -> str:
    """An install encrypted under a key, restarted without it; returns the key."""
    key = Fernet.generate_key().decode()
    settings.MEMCONSOLE_FERNET_KEYS = [key]
    episodes.remember(keys, system, "a secret written under the key")
    settings.MEMCONSOLE_FERNET_KEYS = []
    return key


CALLS = [
    ("post", "remember", {**SCOPE_A, "content": "new personal data"}),
    ("post", "recall", {**SCOPE_A, "query": "secret"}),
    ("post", "inject", {**SCOPE_A, "query": "secret"}),
    ("post", "profile", {**SCOPE_A, "changes": {"notes": "plaintext notes"}}),
    ("post", "forget", {**SCOPE_A, "episode_id": "0" * 32}),
    ("get", "profile", SCOPE_A),
]


@pytest.mark.parametrize(("method", "endpoint", "body"), CALLS, ids=[f"{m} {e}" for m, e, _ in CALLS])
def test_it_answers_every_read_and_write_with_503_naming_the_setting(api, encrypted_install, method, endpoint, body):
    before = memory_rows()

    # api.client, not api.get/post: those assert that no answer is a 5xx
    headers = {"Authorization": f"Bearer {api.secret}"}
    if method == "get":
        response = api.client.get(f"/api/v1/{endpoint}", body, headers=headers)
    else:
        data = json.dumps(body)
        response = api.client.post(f"/api/v1/{endpoint}", data, content_type="application/json", headers=headers)

    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "encryption_key_missing"
    assert "MEMCONSOLE_FERNET_KEYS" in error["message"]
    assert error.get("field") is None
    assert memory_rows() == before


def test_it_still_asks_for_the_token_first(api, encrypted_install):
    assert api.post("recall", {**SCOPE_A, "query": "x"}, secret=None).status_code == 401


def test_it_is_not_ready_without_the_key_and_says_why(client, encrypted_install):
    response = client.get("/readyz")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"] == {"database": "ok", "vector_index": "ok", "encryption_key": "missing"}
    assert "MEMCONSOLE_FERNET_KEYS" in body["reason"]


def test_it_is_ready_again_with_the_key(client, settings, encrypted_install):
    settings.MEMCONSOLE_FERNET_KEYS = [encrypted_install]

    assert client.get("/readyz").status_code == 200


def test_it_is_not_ready_with_keys_that_open_none_of_its_data_and_refuses_writes(
    api, client, settings, encrypted_install
):
    # a server started with another valid key answered ready and stored new episodes under it
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    ready = client.get("/readyz")
    assert ready.status_code == 503 and "None of the keys in MEMCONSOLE_FERNET_KEYS opens" in ready.json()["reason"]
    before = memory_rows()
    body = json.dumps({"bot_uuid": "bot-a", "session_name": "group_1", "content": "not under a stranger's key"})
    headers = {"Authorization": f"Bearer {api.secret}"}
    response = api.client.post("/api/v1/remember", body, content_type="application/json", headers=headers)
    assert memory_rows() == before
    assert response.status_code == 503 and response.json()["error"]["code"] == "encryption_key_missing"
