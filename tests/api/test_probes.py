"""/healthz and /readyz: no login, no data, the right status for monitors and orchestrators."""

from __future__ import annotations

import pytest

from memconsole.lib import vectors


def test_it_answers_liveness_without_login_or_database(client):
    # No `db` fixture: any database access here would fail the test.
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_it_refuses_other_methods(client, path):
    assert client.post(path).status_code == 405


@pytest.mark.django_db
def test_it_is_ready_when_database_and_index_answer(client, scope_with_episodes):
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "vector_index": "ok"}}
    assert "no-cache" in response["Cache-Control"]
    assert "group_100" not in response.content.decode()


@pytest.mark.django_db
def test_it_is_not_ready_when_the_vector_index_is_unreachable(client, settings):
    settings.CHROMA_HOST = "127.0.0.1"
    settings.CHROMA_PORT = 9  # discard: nothing listens there
    vectors.reset_client()

    response = client.get("/readyz")

    assert response.status_code == 503
    body = response.json()
    assert body == {"status": "unavailable", "checks": {"database": "ok", "vector_index": "unavailable"}}
    assert "127.0.0.1" not in response.content.decode()  # which dependency, never how or where


def test_it_is_not_ready_when_the_database_refuses(client):
    # Without the `db` fixture pytest-django refuses every query, as a database that is down would.
    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "unavailable", "vector_index": "ok"}
