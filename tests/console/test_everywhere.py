"""Console-wide behaviour from issue 17: HEAD on the overview for uptime monitors, the login lockout
said in words and in the reader's language, and error answers that carry their own explanation
(console.js shows it instead of a generic message)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import translation

from memconsole.console.templatetags.durations import duration
from tests.conftest import PASSWORD

from .conftest import htmx

pytestmark = pytest.mark.django_db


def test_it_answers_head_on_the_overview_like_get(client, viewer_client):
    assert client.head("/")["Location"].startswith("/accounts/login/")
    response = viewer_client.head("/")
    assert response.status_code == 200 and response.content == b""
    assert response["Content-Type"] == viewer_client.get("/")["Content-Type"]


def locked_out(client, settings, **headers) -> str:
    settings.AXES_FAILURE_LIMIT = 2
    for _ in range(2):
        client.post("/accounts/login/", {"username": "viewer", "password": "wrong"}, **headers)
    response = client.post("/accounts/login/", {"username": "viewer", "password": PASSWORD}, **headers)
    assert response.status_code == 429
    return response.content.decode()


def test_it_says_how_long_a_lockout_lasts_in_words(client, settings, viewer):
    page = locked_out(client, settings)
    assert "Try again in 15\xa0minutes." in page and "0:15:00" not in page


@pytest.mark.parametrize(("language", "words"), [("es", "15\xa0minutos"), ("zh-hans", "15\xa0分钟")])
def test_it_says_the_lockout_in_the_readers_language(client, settings, viewer, language, words):
    page = locked_out(client, settings, HTTP_ACCEPT_LANGUAGE=language)
    assert words in page and "0:15:00" not in page


def test_it_words_durations_in_hours_and_minutes():
    with translation.override("en"):
        assert duration(timedelta(minutes=90)) == "1\xa0hour, 30\xa0minutes"
    assert duration(None) == ""


def test_it_answers_an_htmx_error_with_its_reason_in_an_alert(viewer_client, url, light_scope):
    """The fragment's role=alert text is what console.js puts in the error banner."""
    response = viewer_client.get(url("audit", light_scope.pk), {"cursor": "x"}, **htmx("audit-list"))
    assert response.status_code == 400 and 'role="alert"' in response.content.decode()
    forbidden = viewer_client.post(url("diagnostics_run"), **htmx())
    assert forbidden.status_code == 403 and "Your role does not allow this." in forbidden.content.decode()
