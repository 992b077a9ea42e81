"""Raw HTTP against the live server: limits and errors hold on a real socket, not only in the test client."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

from .conftest import memory_rows

pytestmark = pytest.mark.django_db(transaction=True)


def send(live_server, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None):
    url = urlsplit(live_server.url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        connection.putrequest(method, path)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        connection.endheaders(body or None)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_it_refuses_a_declared_length_over_the_limit_without_reading_it(live_server, token_a, settings):
    settings.MEMCONSOLE_API_MAX_BODY_BYTES = 4096
    before = memory_rows()
    status, headers, body = send(
        live_server,
        "POST",
        "/api/v1/remember",
        b"{}",
        {"Authorization": f"Bearer {token_a[1]}", "Content-Type": "application/json", "Content-Length": str(10**9)},
    )
    assert status == 413 and headers["Content-Type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "payload_too_large"
    assert memory_rows() == before


def test_it_answers_a_real_body_over_the_limit_with_413(live_server, token_a, settings):
    settings.MEMCONSOLE_API_MAX_BODY_BYTES = 4096
    payload = json.dumps({"bot_uuid": "bot-a", "session_name": "g", "content": "x" * 5000}).encode()
    status, _, body = send(
        live_server,
        "POST",
        "/api/v1/remember",
        payload,
        {
            "Authorization": f"Bearer {token_a[1]}",
            "Content-Type": "application/json",
            "Content-Length": str(len(payload)),
        },
    )
    assert status == 413 and json.loads(body)["error"]["code"] == "payload_too_large"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/api/v1/remember", 405),
        ("POST", "/api/v1/nope", 404),
        ("DELETE", "/api/v9", 404),
        ("POST", "/api/v1/recall", 401),
    ],
)
def test_it_answers_json_on_a_real_socket(live_server, method, path, status):
    code, headers, body = send(live_server, method, path, b"<html>", {"Content-Length": "6"})
    assert code == status and headers["Content-Type"] == "application/json"
    assert set(json.loads(body)) == {"error"}
