"""The OpenAPI document is well formed and true: real responses of every endpoint validate against it."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from memconsole.api import site as openapi

from .conftest import SCOPE_A
from .openapi_check import assert_matches_openapi

pytestmark = pytest.mark.django_db


def _refs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _resolve(doc, ref):
    assert ref.startswith("#/"), ref
    node = doc
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def request_validator(doc, name):
    return Draft202012Validator({"components": doc["components"], "$ref": f"#/components/schemas/{name}"})


def test_it_serves_a_well_formed_document(client):
    doc = client.get("/api/v1/openapi.json").json()
    assert doc["openapi"].startswith("3.1") and doc["info"]["title"] and doc["info"]["version"]
    for ref in _refs(doc):
        _resolve(doc, ref)  # every $ref resolves
    for schema in doc["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            assert method in {"get", "post"}, (path, method)
            assert operation["responses"], (path, method)
            assert any(code.startswith("2") for code in operation["responses"])
            if path != "/openapi.json":
                assert operation["security"] == [{"bearerAuth": []}]
                assert {"400", "401", "403", "405", "413", "422", "429"} <= set(operation["responses"])
    assert json.loads(json.dumps(openapi.document())) == doc


def test_it_validates_real_responses_of_every_endpoint(api):
    """Each call goes through `Api`, which validates its response against the document."""
    stored = api.post("remember", {**SCOPE_A, "content": "Alice lives in Paris", "sender_id": "u1", "tags": ["home"]})
    assert stored.status_code == 201
    recalled = api.post("recall", {**SCOPE_A, "query": "Alice"}).json()["episodes"]
    assert recalled and recalled[0]["episode_id"] == stored.json()["episode_id"]
    assert api.get("profile", SCOPE_A).status_code == 200
    assert (
        api.post("profile", {**SCOPE_A, "type": "speaker", "sender_id": "u1", "add_traits": ["kind"]}).status_code
        == 200
    )
    assert api.post("inject", {**SCOPE_A, "query": "Alice", "sender_id": "u1"}).status_code == 200
    assert api.post("forget", {**SCOPE_A, "episode_id": stored.json()["episode_id"]}).status_code == 200
    for status, call in (
        (400, lambda: api.post("recall", raw="{")),
        (401, lambda: api.post("recall", {**SCOPE_A, "query": "x"}, secret=None)),
        (403, lambda: api.post("recall", {"bot_uuid": "bot-b", "session_name": "s", "query": "x"})),
        (404, lambda: api.post("forget", {**SCOPE_A, "episode_id": "0123456789ab"})),
        (405, lambda: api.request("get", "recall")),
        (422, lambda: api.post("recall", {**SCOPE_A, "query": "x", "top_k": 99})),
    ):
        assert call().status_code == status


def test_it_catches_a_response_that_breaks_the_schema(api):
    """The check itself is real: a response with a wrong shape fails it."""
    response = api.post("recall", {**SCOPE_A, "query": "x"})
    response.content = json.dumps({"episodes": [{"episode_id": "nope"}]}).encode()
    with pytest.raises(AssertionError):
        assert_matches_openapi("post", "recall", response)
    response.content = json.dumps({"error": {"code": "x"}}).encode()
    response.status_code = 422
    with pytest.raises(AssertionError):
        assert_matches_openapi("post", "recall", response)


def test_it_describes_the_request_bodies_the_client_sends(client):
    doc = client.get("/api/v1/openapi.json").json()
    remember = request_validator(doc, "RememberRequest")
    good = {**SCOPE_A, "content": "x", "tags": ["a"], "importance": 3, "timestamp": "2025-01-01T00:00:00Z"}
    assert not list(remember.iter_errors(good))
    for bad in ({**good, "importance": 2.5}, {**good, "content": ""}, {**good, "extra": 1}, {"content": "no scope"}):
        assert list(remember.iter_errors(bad)), bad
    profile = request_validator(doc, "ProfileUpdateRequest")
    assert not list(profile.iter_errors({**SCOPE_A, "type": "speaker", "sender_id": "u", "set": {"name": "A"}}))
    assert list(profile.iter_errors({**SCOPE_A, "set": {"nmae": "A"}}))
