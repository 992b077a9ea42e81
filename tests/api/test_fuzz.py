"""Property-based fuzzing of every endpoint: whatever arrives, no 5xx and no response off the schema.

Bodies mix near-valid requests (right names, wrong or extreme values) with arbitrary JSON and raw
bytes; each response is checked against the OpenAPI document by `Api`. Bounded to a few seconds.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memconsole.memory.audit import verify_audit_chain

from . import request_fields

pytestmark = pytest.mark.django_db

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
timestamps = st.one_of(
    st.datetimes(timezones=st.sampled_from([UTC, None])).map(lambda d: d.isoformat()),
    st.sampled_from(
        [
            "2025-01-01T00:00:00Z",
            "2025-01-01T00:00",
            "0001-01-01T00:00:00+05:00",
            "9999-12-31T23:59:59-05:00",
            "2025-13-01T00:00Z",
            "soon",
        ]
    ),
)
texts = st.text(max_size=40) | st.sampled_from(
    ["", "   ", "Alice lives in Paris", "我喜欢喝绿茶", "x" * 9000, "a\x00b"]
)
string_lists = st.lists(texts | st.sampled_from(["correction", "fact-update", "a,b"]), max_size=22)


def value_for(kind: str) -> st.SearchStrategy:
    typed = {
        "string": texts,
        "integer": st.integers(min_value=-2, max_value=60)
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False),
        "strings": string_lists,
        "datetime": timestamps,
        "object": st.fixed_dictionaries({}, optional={"name": texts, "notes": texts, "other": json_values}),
    }[kind]
    return st.one_of(typed, typed, typed, json_values)  # mostly the right type, sometimes anything


SPECIAL = {
    "bot_uuid": st.sampled_from(["bot-a", "bot-a", "bot-a", "bot-b", "", " bot-a ", "a:b"]) | json_values,
    "session_name": st.sampled_from(["group_1", "person_2", "group_1", "x" * 300]) | texts,
    "isolation": st.sampled_from(["session", "bot", "", "global"]) | json_values,
    "type": st.sampled_from(["session", "speaker", "group"]),
    "episode_id": st.sampled_from(["0123456789ab", "zz", ""]) | texts,
    "statuses": st.lists(st.sampled_from(["active", "superseded", "archived", "deleted"]), max_size=4) | json_values,
}

ENDPOINTS = {
    ("post", "remember"): request_fields.REMEMBER_FIELDS,
    ("post", "recall"): request_fields.RECALL_FIELDS,
    ("get", "profile"): request_fields.PROFILE_QUERY_FIELDS,
    ("post", "profile"): request_fields.PROFILE_UPDATE_FIELDS,
    ("post", "forget"): request_fields.FORGET_FIELDS,
    ("post", "inject"): request_fields.INJECT_FIELDS,
}


SCOPE = {"bot_uuid": "bot-a", "session_name": "group_1"}
VALID: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "remember"): {**SCOPE, "content": "Alice lives in Paris", "sender_id": "u1"},
    ("post", "recall"): {**SCOPE, "query": "where does Alice live"},
    ("get", "profile"): {**SCOPE, "type": "session"},
    ("post", "profile"): {**SCOPE, "type": "speaker", "sender_id": "u1", "add_traits": ["kind"]},
    ("post", "forget"): {**SCOPE, "episode_id": "0123456789ab"},
    ("post", "inject"): {**SCOPE, "query": "where does Alice live", "sender_id": "u1"},
}


def value_for_field(name: str, fields: dict[str, str]) -> st.SearchStrategy:
    if name in SPECIAL:
        return SPECIAL[name]
    return value_for(fields[name]) if name in fields else json_values


def near_valid(endpoint: tuple[str, str]) -> st.SearchStrategy:
    """A valid request with up to three fields replaced, added or dropped."""
    fields = ENDPOINTS[endpoint]
    names = [*sorted(fields), "unexpected"]

    def mutate(changes: tuple[dict, list[str]]) -> dict:
        replaced, dropped = changes
        body = {**VALID[endpoint], **replaced}
        return {key: value for key, value in body.items() if key not in dropped}

    replaced = st.lists(st.sampled_from(names), max_size=3, unique=True).flatmap(
        lambda chosen: st.fixed_dictionaries({name: value_for_field(name, fields) for name in chosen})
    )
    return st.tuples(replaced, st.lists(st.sampled_from(sorted(fields)), max_size=1)).map(mutate)


def body_for(endpoint: tuple[str, str]) -> st.SearchStrategy:
    as_json = near_valid(endpoint).map(lambda body: json.dumps(body, ensure_ascii=False))
    return st.one_of(
        as_json, as_json, as_json, json_values.map(json.dumps), st.binary(max_size=60), st.text(max_size=60)
    )


def test_it_finds_no_5xx_and_no_response_off_the_schema(api, settings):
    settings.MEMCONSOLE_API_RATE_PER_MINUTE = 10**6
    seen: Counter[int] = Counter()

    @hypothesis_settings(
        max_examples=100,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def fuzz(data):
        method, endpoint = data.draw(st.sampled_from(sorted(ENDPOINTS)), label="endpoint")
        if method == "get":
            params = data.draw(near_valid((method, endpoint)), label="query")
            params = {key: value if isinstance(value, str) else json.dumps(value) for key, value in params.items()}
            response = api.get(endpoint, params)  # asserts status < 500, JSON, and the schema
        else:
            raw = data.draw(body_for((method, endpoint)), label="body")
            response = api.post(endpoint, raw=raw)
        assert response.status_code in {200, 201, 400, 403, 404, 409, 413, 422}, response.content  # 409: if_version
        seen[response.status_code] += 1

    fuzz()
    # The fuzzing reached past validation into every kind of answer, and broke nothing.
    assert {200, 201, 400, 422} <= set(seen), seen
    assert verify_audit_chain().ok


@hypothesis_settings(
    max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    method=st.sampled_from(["get", "post", "put", "patch", "delete", "options"]),
    path=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789/._-%", max_size=20),
)
def test_it_answers_any_path_and_method_with_json(api, method, path):
    response = api.request(method, path)  # validates JSON, no 5xx and the error envelope
    assert response.status_code in {200, 401, 404, 405}
