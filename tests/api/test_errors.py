"""Every error the API gives: JSON envelope, right status, and nothing written."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone, translation

from memconsole.api import views
from memconsole.api.models import RateWindow
from memconsole.memory import tokens
from memconsole.memory.audit import Actor
from memconsole.memory.models import BotToken

from .conftest import SCOPE_A, Api, clear_of_minute_boundary, memory_rows

pytestmark = pytest.mark.django_db

REMEMBER = {**SCOPE_A, "content": "Alice lives in Paris", "sender_id": "u1"}


def error_of(response, status: int, code: str, field: str | None = None) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    if field is not None:
        assert error.get("field") == field, error
    return error


@pytest.fixture
def unchanged(db):
    """Asserts at the end of the test that no memory row (audit included) was written."""
    before = memory_rows()
    yield
    assert memory_rows() == before


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ('{"content": "x",', "malformed_json"),
        ("", "malformed_json"),
        ("[1, 2]", "invalid_body"),
        ('"just a string"', "invalid_body"),
        ('{"importance": NaN}', "malformed_json"),
        ('{"importance": Infinity}', "malformed_json"),
        ('{"importance": -Infinity}', "malformed_json"),
        ('{"importance": 1e400}', "malformed_json"),
        ('{"importance": ' + "9" * 5000 + "}", "malformed_json"),
        ("[" * 100 + "]" * 100, "invalid_body"),
        ('{"a": ' + "[" * 50000 + "]" * 50000 + "}", "invalid_body"),
        ('{"content": "\\ud800 lone surrogate"}', "invalid_body"),
        (b"\xff\xfe{}", "malformed_json"),
    ],
)
def test_it_answers_400_for_malformed_bodies(api, unchanged, raw, code):
    error_of(api.post("remember", raw=raw), 400, code)


def test_a_number_with_too_many_digits_is_explained_without_python_internals(api, unchanged):
    response = api.post("remember", raw='{"importance": ' + "9" * 5000 + "}")
    error_of(response, 400, "malformed_json")
    assert response.json()["error"]["message"] == "a number in the body has too many digits"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("content", 42),
        ("content", ["a"]),
        ("tags", "travel"),
        ("tags", [1, 2]),
        ("importance", "3"),
        ("importance", True),
        ("importance", 2.5),
        ("sender_id", {"id": 1}),
        ("timestamp", 1700000000),
        ("timestamp", "yesterday"),
        ("timestamp", "2025-02-30T10:00:00Z"),
        ("bot_uuid", 7),
        ("isolation", False),
    ],
)
def test_it_answers_400_for_wrong_types(api, unchanged, field, value):
    error_of(api.post("remember", {**REMEMBER, field: value}), 400, "invalid_type", field)


def test_a_time_with_an_impossible_offset_is_explained_without_python_internals(api, unchanged):
    response = api.post("remember", {**REMEMBER, "timestamp": "2026-01-01T00:00:00+99:99"})
    error_of(response, 400, "invalid_type", "timestamp")
    message = response.json()["error"]["message"]
    assert "UTC offset must be less than 24 hours" in message and "timedelta" not in message


def test_it_answers_400_for_unknown_fields(api, unchanged):
    error_of(api.post("remember", {**REMEMBER, "conten": "typo"}), 400, "unknown_field", "conten")
    error_of(api.post("profile", {**SCOPE_A, "set": {"nmae": "x"}}), 400, "unknown_field", "set.nmae")
    error_of(api.get("profile", {**SCOPE_A, "sender": "u1"}), 400, "unknown_field", "sender")


def test_it_answers_400_for_a_content_length_that_is_not_a_number(api, unchanged):
    response = api.client.generic(
        "POST",
        "/api/v1/remember",
        b"",
        content_type="application/json",
        headers={"Authorization": f"Bearer {api.secret}"},
        CONTENT_LENGTH="abc",
    )
    error_of(response, 400, "bad_request")


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer mct_00000000_not-a-real-token"},
        {"Authorization": "Bearer " + "x" * 5000},
    ],
)
def test_it_answers_401_without_a_valid_token(token_a, unchanged, client, headers):
    response = client.post("/api/v1/remember", REMEMBER, content_type="application/json", headers=headers)
    error_of(response, 401, "unauthorized")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_answers_401_for_a_revoked_token(api, token_a):
    row, _ = token_a
    tokens.revoke(row, Actor.system("tests"))  # audited itself, so rows are counted after it
    before = memory_rows()
    for endpoint in ("remember", "recall", "forget", "inject", "profile"):
        error_of(api.post(endpoint, REMEMBER), 401, "unauthorized")
    error_of(api.get("profile", SCOPE_A), 401, "unauthorized")
    assert memory_rows() == before


def test_it_answers_403_for_a_bot_the_token_does_not_hold(api, unchanged):
    other = {"bot_uuid": "bot-b", "session_name": "group_100"}
    error_of(api.post("remember", {**REMEMBER, **other}), 403, "forbidden", "bot_uuid")
    error_of(api.post("recall", {**other, "query": "anything"}), 403, "forbidden")
    error_of(api.get("profile", other), 403, "forbidden")
    error_of(api.post("profile", {**other, "set": {"name": "x"}}), 403, "forbidden")
    error_of(api.post("forget", {**other, "episode_id": "0123456789ab"}), 403, "forbidden")
    error_of(api.post("inject", {**other, "query": "anything"}), 403, "forbidden")


@pytest.mark.parametrize(
    "path",
    ["/api/v1/nothing", "/api/v1/remember/", "/api/v1/", "/api/v1", "/api/v2/remember", "/api/", "/api"],
)
def test_it_answers_json_404_for_unknown_api_paths(client, path):
    for method in ("get", "post", "put", "delete"):
        error_of(getattr(client, method)(path), 404, "not_found")


def test_it_answers_404_for_an_episode_outside_the_scope(api, unchanged):
    error_of(api.post("forget", {**SCOPE_A, "episode_id": "0123456789ab"}), 404, "not_found")
    error_of(api.post("forget", {**SCOPE_A, "episode_id": "not an id; drop table"}), 404, "not_found")


@pytest.mark.parametrize(
    ("method", "endpoint", "allow"),
    [
        ("get", "remember", "POST"),
        ("put", "recall", "POST"),
        ("delete", "profile", "GET, POST"),
        ("patch", "forget", "POST"),
        ("get", "inject", "POST"),
        ("post", "openapi.json", "GET"),
    ],
)
def test_it_answers_405_for_a_wrong_method(api, unchanged, method, endpoint, allow):
    response = api.request(method, endpoint)
    error_of(response, 405, "method_not_allowed")
    assert response["Allow"] == allow


def test_it_answers_413_for_a_body_over_the_limit(api, settings):
    settings.MEMCONSOLE_API_MAX_BODY_BYTES = 2048
    before = memory_rows()
    error_of(api.post("remember", {**REMEMBER, "content": "x" * 3000}), 413, "payload_too_large")
    # The declared length alone is enough: the body is never read.
    response = api.client.generic(
        "POST",
        "/api/v1/remember",
        b"",
        content_type="application/json",
        headers={"Authorization": f"Bearer {api.secret}"},
        CONTENT_LENGTH=str(10**9),
    )
    error_of(response, 413, "payload_too_large")
    assert memory_rows() == before
    assert api.post("remember", {**REMEMBER, "content": "x" * 1500}).status_code == 201


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"content": ""}, "content"),
        ({"content": "   "}, "content"),
        ({"content": None}, "content"),
        ({"content": "x" * 8001}, "content"),
        ({"content": "nul \x00 inside"}, "content"),
        ({"tags": [f"t{i}" for i in range(21)]}, "tags"),
        ({"tags": ["a,b"]}, "tags"),
        ({"timestamp": "0001-01-01T00:00:00+05:00"}, "timestamp"),
        ({"bot_uuid": ""}, "bot_uuid"),
        ({"session_name": ""}, "session_name"),
        ({"session_name": "x" * 256}, "session_name"),
        ({"isolation": "global"}, "isolation"),
    ],
)
def test_it_answers_422_for_remember_rule_breaks(api, unchanged, changes, field):
    error_of(api.post("remember", {**REMEMBER, **changes}), 422, "invalid", field)


def test_it_refuses_an_episode_dated_in_the_future_and_accepts_a_bots_clock_a_little_ahead(api):
    # an episode dated 9999-12-30 was stored and ranked first in recall ("recency": 1.0) for good
    before = memory_rows()
    error = error_of(
        api.post("remember", {**REMEMBER, "timestamp": "9999-12-30T00:00:00Z"}), 422, "invalid", "timestamp"
    )
    assert error["message"] == "timestamp is in the future: an episode's time is when it happened or was said"
    batch = {**SCOPE_A, "episodes": [{"content": "ok"}, {"content": "later", "timestamp": "2999-01-01T00:00:00Z"}]}
    assert api.post("remember", batch).status_code == 422  # all or nothing
    assert memory_rows() == before
    soon = (timezone.now() + timedelta(minutes=4)).isoformat()
    assert api.post("remember", {**REMEMBER, "timestamp": soon}).status_code == 201


def test_an_out_of_range_time_is_worded_as_the_domain_words_it(api, unchanged):
    # one limit read "timestamp is out of range" and, from the schema, "timestamp: is out of range"
    error = error_of(api.post("remember", {**REMEMBER, "timestamp": "9999-12-31T23:59:59-05:00"}), 422, "invalid")
    assert error["message"] == "timestamp is out of range"
    error = error_of(api.post("remember", {**REMEMBER, "timestamp": "0001-01-01T00:00:00+05:00"}), 422, "invalid")
    assert error["message"] == "timestamp is out of range"


def test_it_answers_422_for_other_rule_breaks(api, unchanged):
    recall = {**SCOPE_A, "query": "paris"}
    error_of(api.post("recall", {**recall, "top_k": 0}), 422, "invalid", "top_k")
    error_of(api.post("recall", {**recall, "top_k": 51}), 422, "invalid", "top_k")
    error_of(api.post("recall", {**recall, "statuses": ["deleted"]}), 422, "invalid", "statuses")
    error_of(api.post("recall", {**recall, "query": ""}), 422, "invalid", "query")
    error_of(api.post("recall", {**recall, "importance_min": 6}), 422, "invalid", "importance_min")
    error_of(api.get("profile", {**SCOPE_A, "type": "group"}), 422, "invalid", "type")
    error_of(api.get("profile", {**SCOPE_A, "type": "speaker"}), 422, "invalid", "sender_id")
    error_of(api.post("forget", SCOPE_A), 422, "invalid", "episode_id")
    error_of(api.post("inject", {**SCOPE_A, "query": "x", "top_k": 100}), 422, "invalid", "top_k")
    error_of(api.post("inject", {**SCOPE_A, "query": "   "}), 422, "invalid", "query")


def test_it_answers_422_for_lists_over_the_limit_and_keeps_the_profile(api):
    speaker = {**SCOPE_A, "type": "speaker", "sender_id": "u1"}
    assert api.post("profile", {**speaker, "add_traits": [f"trait {i}" for i in range(20)]}).status_code == 200
    before = memory_rows()
    error_of(
        api.post("profile", {**speaker, "add_preferences": [f"p{i}" for i in range(11)]}), 422, "invalid", "preferences"
    )
    error_of(api.post("profile", {**speaker, "add_traits": [""]}), 422, "invalid", "traits")
    assert memory_rows() == before
    assert len(api.get("profile", speaker | {"type": "speaker"}).json()["traits"]) == 20


def test_it_answers_429_over_the_rate_limit_with_retry_after(api, settings):
    settings.MEMCONSOLE_API_RATE_PER_MINUTE = 3
    clear_of_minute_boundary()
    for _ in range(3):
        assert api.post("recall", {**SCOPE_A, "query": "paris"}).status_code == 200
    before = memory_rows()
    response = api.post("remember", REMEMBER)
    error_of(response, 429, "rate_limited")
    assert 1 <= int(response["Retry-After"]) <= 60
    assert memory_rows() == before


def test_it_keeps_the_rate_limit_in_the_database_shared_by_workers(api, token_a, token_b, settings):
    """Another worker's requests are rows in the database: seeding them is enough to hit the limit."""
    settings.MEMCONSOLE_API_RATE_PER_MINUTE = 5
    clear_of_minute_boundary()
    window = timezone.now().replace(second=0, microsecond=0)
    RateWindow.objects.create(token=token_a[0], window=window, count=5)
    error_of(api.post("recall", {**SCOPE_A, "query": "paris"}), 429, "rate_limited")
    # Per token: bot b's token is not affected, and its request is counted in its own window.
    assert Api(token_b[1]).post("recall", {"bot_uuid": "bot-b", "session_name": "s", "query": "x"}).status_code == 200
    assert RateWindow.objects.get(token=token_b[0]).count == 1
    assert BotToken.objects.get(pk=token_b[0].pk).last_used_at is not None


def test_it_drops_old_rate_windows(api, token_a):
    old = timezone.now().replace(second=0, microsecond=0) - timezone.timedelta(minutes=5)
    RateWindow.objects.create(token=token_a[0], window=old, count=10**6)
    assert api.post("recall", {**SCOPE_A, "query": "paris"}).status_code == 200
    assert list(RateWindow.objects.filter(token=token_a[0]).values_list("count", flat=True)) == [1]


def test_it_never_serves_html_errors_under_api(client, api):
    for response in (
        client.get("/api/v1/remember"),
        client.post("/api/v1/remember", "nonsense", content_type="text/plain"),
        client.get("/api/whatever"),
        api.post("remember", raw="{"),
    ):
        assert response["Content-Type"] == "application/json"
        assert b"<html" not in response.content.lower()
        assert set(json.loads(response.content)) == {"error"}


def test_it_answers_json_for_errors_raised_before_any_view(client):
    response = client.get("/api/v1/openapi.json", headers={"Host": "evil.example"})
    error_of(response, 400, "bad_request")
    assert client.get("/", headers={"Host": "evil.example"})["Content-Type"].startswith("text/html")
    refused = client.post("/mcp", data="{}", content_type="application/json", headers={"Host": "evil.example"})
    error_of(refused, 400, "bad_request")  # the MCP face answers JSON too, not the console's page


def test_it_answers_json_for_server_errors_under_api(rf):
    response = views.server_error(rf.get("/api/v1/recall"))
    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert json.loads(response.content)["error"]["code"] == "internal_error"
    assert views.server_error(rf.get("/"))["Content-Type"].startswith("text/html")
    assert views.server_error(rf.post("/mcp"))["Content-Type"] == "application/json"  # the MCP face too


def test_it_answers_413_when_djangos_own_body_cap_is_lower(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    error_of(api.post("remember", {**REMEMBER, "content": "x" * 2000}), 413, "payload_too_large")


@pytest.mark.parametrize(("language", "title"), [("zh-hans", "服务器错误"), ("es", "Error del servidor")])
def test_the_consoles_server_error_page_speaks_the_readers_language(rf, language, title):
    with translation.override(language):
        page = views.server_error(rf.get("/")).content.decode()
    assert f'<html lang="{language}">' in page and f"<h1>{title}</h1>" in page and "Something went wrong" not in page
