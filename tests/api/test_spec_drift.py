"""The generated OpenAPI document and the server agree on the cases where the hand-written one drifted.

For each request: the document's schema accepts it exactly when the server does not refuse it as a
bad request (400) or a broken rule (422), and the server's answer is documented for the endpoint.
"""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from memconsole.api import site
from memconsole.memory import validation

from .conftest import SCOPE_A

pytestmark = pytest.mark.django_db

SPEAKER = {**SCOPE_A, "type": "speaker", "sender_id": "u1"}
CASES = [
    # tags: at most 20 items, repeats included (the old document said 20 while 25 repeats were stored).
    ("remember", "RememberRequest", {**SCOPE_A, "content": "x", "tags": ["trip"] * 25}, 422),
    ("remember", "RememberRequest", {**SCOPE_A, "content": "x", "tags": ["trip"] * 20}, 201),
    ("recall", "RecallRequest", {**SCOPE_A, "query": "x", "tags": ["trip"] * 21}, 422),
    # forget: any string names an episode or not; one that is no episode id is not found (404), as before.
    ("forget", "ForgetRequest", {**SCOPE_A, "episode_id": "not an id; drop table"}, 404),
    ("forget", "ForgetRequest", {**SCOPE_A, "episode_id": "0123456789ab"}, 404),
    # add_traits / add_preferences: no more items than a profile holds (500 repeats were accepted).
    ("profile", "ProfileUpdateRequest", {**SPEAKER, "add_traits": ["kind"] * 500}, 422),
    ("profile", "ProfileUpdateRequest", {**SPEAKER, "add_traits": ["kind"] * 20}, 200),
    ("profile", "ProfileUpdateRequest", {**SPEAKER, "remove_traits": ["kind"] * 21}, 422),
    ("profile", "ProfileUpdateRequest", {**SPEAKER, "add_preferences": ["tea"] * 11}, 422),
]


@pytest.fixture(scope="module")
def document():
    return site.document()


@pytest.mark.parametrize(("endpoint", "schema", "body", "status"), CASES)
def test_it_documents_what_the_server_accepts(api, document, endpoint, schema, body, status):
    validator = Draft202012Validator({"components": document["components"], "$ref": f"#/components/schemas/{schema}"})
    documented_valid = not list(validator.iter_errors(body))

    response = api.post(endpoint, body)  # the answer validates against the document too

    assert response.status_code == status, response.content
    assert documented_valid == (status not in (400, 422)), (body, response.content)
    assert str(status) in document["paths"][f"/{endpoint}"]["post"]["responses"]


def test_it_names_the_limit_that_repeats_break(api):
    response = api.post("remember", {**SCOPE_A, "content": "x", "tags": ["trip"] * 25})
    assert response.json()["error"]["field"] == "tags"
    response = api.post("profile", {**SPEAKER, "add_traits": ["kind"] * 500})
    assert response.json()["error"]["field"] == "traits"


def test_it_takes_its_limits_from_the_domain(document, settings):
    schemas = document["components"]["schemas"]
    assert schemas["RememberRequest"]["properties"]["tags"]["anyOf"][0]["maxItems"] == validation.MAX_TAGS
    assert schemas["RememberRequest"]["properties"]["content"]["maxLength"] == validation.max_content_chars()
    assert schemas["RecallRequest"]["properties"]["top_k"]["anyOf"][0]["maximum"] == validation.TOP_K_MAX
    traits = schemas["ProfileUpdateRequest"]["properties"]["add_traits"]["anyOf"][0]
    assert traits["maxItems"] == validation.MAX_TRAITS
    assert "pattern" not in schemas["ForgetRequest"]["properties"]["episode_id"]
    settings.MEMCONSOLE_MAX_CONTENT_CHARS = 500  # a setting: read for each document
    assert site.document()["components"]["schemas"]["RememberRequest"]["properties"]["content"]["maxLength"] == 500
