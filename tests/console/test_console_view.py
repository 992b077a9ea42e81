"""The one console decorator: login, roles, never_cache, Vary: HX-Request, and the memory errors
mapped to 404, 403, 400 and a 503 page that says what is wrong."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.test import RequestFactory
from django_htmx.middleware import HtmxDetails
from pytest_django.asserts import assertContains

from memconsole.console.access import console_view, scope_view
from memconsole.lib import crypto, embeddings, vectors
from memconsole.memory import errors, queries, roles
from memconsole.memory.episodes import list_episodes

from .conftest import htmx

pytestmark = pytest.mark.django_db


def call(view, user, **headers):
    request = RequestFactory().get("/somewhere/", **headers)
    request.user = user
    request.htmx = HtmxDetails(request)
    return view(request)


def raising(error: Exception):
    @console_view()
    def view(request) -> HttpResponse:
        raise error

    return view


def test_it_sends_the_anonymous_to_the_login_page():
    response = call(raising(errors.NotFound("x")), AnonymousUser())
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_it_answers_a_memory_not_found_with_404(viewer):
    with pytest.raises(Http404):
        call(raising(errors.NotFound("no such episode in this scope")), viewer)


def test_it_answers_a_memory_permission_denied_with_403(viewer):
    with pytest.raises(PermissionDenied):
        call(raising(errors.PermissionDenied("this actor may not use this bot's memory")), viewer)


def test_it_answers_too_low_a_role_with_403_before_the_view_runs(viewer):
    ran = []

    @console_view(roles.OPERATE)
    def view(request) -> HttpResponse:
        ran.append(True)
        return HttpResponse("done")

    with pytest.raises(PermissionDenied):
        call(view, viewer)
    assert ran == []


def test_it_answers_a_scope_outside_the_grants_with_404_before_the_role_check(granted_viewer, scope):
    @scope_view(roles.OPERATE)
    def view(request, scope, keys) -> HttpResponse:
        return HttpResponse("done")

    request = RequestFactory().get("/somewhere/")
    request.user = granted_viewer  # limited to bot-b: the bot-a scope does not exist for them
    request.htmx = HtmxDetails(request)
    with pytest.raises(Http404):
        view(request, scope_id=scope.pk)


def test_it_answers_a_memory_validation_error_with_a_clear_400(viewer):
    response = call(raising(errors.ValidationError("bad page cursor", field="cursor")), viewer)
    assert response.status_code == 400 and b"bad page cursor" in response.content and b"<html" in response.content


@pytest.mark.parametrize(
    ("code", "says"),
    [
        ("vector_index", b"The search index cannot be reached"),
        ("embedding_model", b"The embedding model cannot be loaded"),
        ("decryption", b"encrypted with a key this server does not have"),
        ("unavailable", b"is not available right now"),
    ],
)
def test_it_answers_unavailable_with_a_503_page_that_says_what_is_wrong(viewer, code, says):
    response = call(raising(errors.Unavailable("chroma at 10.0.0.9 refused", code=code)), viewer)
    assert response.status_code == 503 and says in response.content
    assert b"Diagnostics" in response.content and b"10.0.0.9" not in response.content


def test_it_answers_unavailable_to_htmx_with_the_fragment_only(viewer):
    response = call(raising(errors.Unavailable("down", code="vector_index")), viewer, **htmx())
    assert response.status_code == 503 and b"<html" not in response.content and b'role="alert"' in response.content


def test_it_answers_an_outside_failure_that_escaped_the_domain_with_503(viewer):
    response = call(raising(crypto.DecryptionError("no key opens this token")), viewer)
    assert response.status_code == 503 and b"encrypted with a key this server does not have" in response.content


def test_it_never_caches_and_varies_on_htmx_every_answer(viewer):
    for view in (raising(errors.Unavailable("down")), raising(errors.ValidationError("bad"))):
        response = call(view, viewer)
        assert "no-cache" in response["Cache-Control"] and "HX-Request" in response["Vary"]


def test_it_translates_the_503_page(viewer_client, monkeypatch):
    def refuse():
        raise errors.Unavailable("down")

    monkeypatch.setattr(queries, "latest_health_run", refuse)
    response = viewer_client.get("/diagnostics/", HTTP_ACCEPT_LANGUAGE="es")
    assertContains(response, "Ahora mismo no está disponible un sistema del que depende memconsole", status_code=503)


# --- outside systems failing under real screens ---------------------------------------------------


def test_it_shows_an_undecryptable_episode_as_a_503_page_not_a_traceback(viewer_client, url, scope, keys, monkeypatch):
    episode_id = list_episodes(keys, limit=10).episodes[0].episode_id

    def refuse(stored, encrypted, *identity):
        raise crypto.DecryptionError("no configured key opens this token")

    monkeypatch.setattr(crypto, "open_text", refuse)
    response = viewer_client.get(url("episode_detail", scope.pk, episode_id))
    assert response.status_code == 503 and "encrypted with a key this server does not have" in response.content.decode()


def test_it_answers_a_search_without_an_embedding_model_with_503(viewer_client, url, scope, monkeypatch):
    def refuse(texts, kind="passage"):
        raise embeddings.EmbeddingError("the model files are missing")

    monkeypatch.setattr(embeddings, "embed", refuse)
    response = viewer_client.get(url("episodes", scope.pk), {"q": "trip"})
    assert response.status_code == 503 and "The embedding model cannot be loaded" in response.content.decode()


def test_it_keeps_the_filters_when_the_index_cannot_search(viewer_client, url, scope, monkeypatch):
    def refuse(*args, **kwargs):
        raise vectors.VectorIndexError("chroma refused")

    monkeypatch.setattr(vectors, "query", refuse)
    response = viewer_client.get(url("episodes", scope.pk), {"q": "trip"})
    page = response.content.decode()
    assert response.status_code == 503 and "The search index is not available right now" in page
    assertContains(response, 'id="id_q"', status_code=503)
