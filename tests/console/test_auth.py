"""Login, logout, the login rate limit, the language switcher and the page chrome."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client
from pytest_django.asserts import assertContains

from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def test_it_shows_the_login_form_with_its_accessible_names(client):
    response = client.get("/accounts/login/")
    html = response.content.decode()
    assert response.status_code == 200
    assert re.search(r'<label for="id_username">Username</label>', html)
    assert re.search(r'<label for="id_password">Password</label>', html)
    assert re.search(r'<button type="submit">Log in</button>', html)


def test_it_logs_in_and_lands_on_the_overview(client, viewer):
    response = client.post("/accounts/login/", {"username": "viewer", "password": PASSWORD}, follow=True)
    assert response.redirect_chain[-1][0] == "/"
    assertContains(response, "Memory spaces")


def test_it_shows_an_inline_error_for_a_wrong_password(client, viewer):
    response = client.post("/accounts/login/", {"username": "viewer", "password": "wrong"})
    assertContains(response, 'class="form-errors" role="alert"')


def test_it_locks_an_account_out_after_repeated_failures(client, viewer, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/accounts/login/", {"username": "viewer", "password": "wrong"})
    response = client.post("/accounts/login/", {"username": "viewer", "password": PASSWORD})
    assertContains(response, "Too many failed logins", status_code=429)
    assertContains(response, b"<html", status_code=429)


def test_it_logs_out_with_a_post_button(viewer_client):
    response = viewer_client.get("/")
    assert response.status_code == 200
    page = response.content.decode()
    assert re.search(
        r'action="/accounts/logout/">\s*<input type="hidden" name="csrfmiddlewaretoken"[^>]*>\s*<button type="submit" class="secondary">Log out</button>',
        page,
    )
    response = viewer_client.post("/accounts/logout/")
    assert response.status_code == 302
    assert viewer_client.get("/").status_code == 302


def test_it_refuses_logout_by_get(viewer_client):
    assert viewer_client.get("/accounts/logout/").status_code == 405


def test_it_enforces_csrf_on_login(viewer):
    client = Client(enforce_csrf_checks=True)
    assert client.post("/accounts/login/", {"username": "viewer", "password": PASSWORD}).status_code == 403


def test_it_switches_language_and_remembers_it(viewer_client):
    response = viewer_client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    assert response.status_code == 302 and response["Location"] == "/"
    assertContains(viewer_client.get("/"), '<html lang="zh-hans"')
    response = viewer_client.post("/i18n/setlang/", {"language": "es", "next": "/"})
    assertContains(viewer_client.get("/"), '<html lang="es"')


def test_it_offers_every_language_in_the_switcher(viewer_client):
    response = viewer_client.get("/")
    assertContains(response, '<label for="language-select">Language</label>')
    for code in ("en", "zh-hans", "es"):
        assertContains(response, f'<option value="{code}"')
    assertContains(response, 'action="/i18n/setlang/"')


def test_it_loads_htmx_and_sends_the_csrf_token_once_on_the_body(viewer_client):
    response = viewer_client.get("/")
    page = response.content.decode()
    assertContains(response, "django_htmx/htmx-2.min.js")
    assert re.search(r"<body hx-headers='\{\"X-CSRFToken\": \"[^\"]+\"\}'", page)
    # nothing loaded from a CDN (the page's random CSRF token may hold the letters "cdn": it failed once so)
    assert not re.search(r"""(?:src|href)=["'][^"']*cdn""", page, re.IGNORECASE)


def test_it_has_a_theme_toggle_and_its_scripts(viewer_client):
    response = viewer_client.get("/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="theme-toggle"' in page and 'aria-pressed="false"' in page and ">Dark theme</button>" in page
    assert "console/theme.js" in page and "console/console.js" in page and "console/console.css" in page


def test_it_serves_the_static_files(viewer_client):
    for name in ("console/console.css", "console/console.js", "console/theme.js"):
        assert finders.find(name), name


def test_guessing_the_current_password_on_the_change_form_counts_as_failed_logins(viewer_client, settings):
    """Found by attacking a session: the change form checked the old password without any limit."""
    new = {"new_password1": "An0ther-long-passphrase!", "new_password2": "An0ther-long-passphrase!"}
    for n in range(settings.AXES_FAILURE_LIMIT - 1):
        response = viewer_client.post("/accounts/password_change/", {"old_password": f"guess {n}", **new})
        assert response.status_code == 400
    response = viewer_client.post("/accounts/password_change/", {"old_password": "last guess", **new})
    assertContains(response, "Too many failed logins", status_code=429)
    # The session is gone, and the right password no longer opens the account until the cool-off.
    assert viewer_client.get("/")["Location"].startswith("/accounts/login/")
    locked = Client().post("/accounts/login/", {"username": "viewer", "password": PASSWORD})
    assertContains(locked, "Too many failed logins", status_code=429)


# --- a session that expired while a page was open ---------------------------------------------


def test_a_page_asked_for_without_a_session_goes_to_the_login_and_back(client):
    response = client.get("/audit/?operation=remember")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=%2Faudit%2F%3Foperation%3Dremember"


def test_an_htmx_request_after_the_session_expired_loads_the_login_as_a_whole_page(client):
    """Found by a console user: the login page appeared inside the episode table, and logging in
    from it ended on a 405 (its `next` was the POST-only archive address)."""
    here = "http://testserver/scopes/1/episodes/?tag=work&page=2"
    response = client.post("/scopes/1/episodes/abcdefabcdef/archive/", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL=here)

    assert response.status_code == 200 and response.content == b""
    assert response["HX-Redirect"] == "/accounts/login/?next=%2Fscopes%2F1%2Fepisodes%2F%3Ftag%3Dwork%26page%3D2"


def test_an_htmx_filter_after_the_session_expired_comes_back_to_the_page_not_the_fragment(client):
    here = "http://testserver/scopes/1/episodes/"
    response = client.get("/scopes/1/episodes/?tag=x", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL=here)
    assert response["HX-Redirect"] == "/accounts/login/?next=%2Fscopes%2F1%2Fepisodes%2F"


@pytest.mark.parametrize("referer", [None, "https://evil.example/scopes/1/", "javascript:alert(1)"])
def test_a_post_without_a_session_comes_back_only_to_a_page_of_this_site(client, referer):
    extra = {"HTTP_REFERER": referer} if referer else {}
    response = client.post("/scopes/1/episodes/abcdefabcdef/archive/", **extra)
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=%2F"


def test_a_post_without_a_session_comes_back_to_the_page_it_was_sent_from(client):
    response = client.post(
        "/scopes/1/episodes/abcdefabcdef/archive/", HTTP_REFERER="http://testserver/scopes/1/episodes/"
    )
    assert response["Location"] == "/accounts/login/?next=%2Fscopes%2F1%2Fepisodes%2F"


def test_a_form_from_before_the_session_changed_says_to_reload_not_csrf_jargon(viewer):
    """Found by a console user: after logging in again in another tab, acting in the first tab
    showed "CSRF verification failed. Request aborted." and nothing else."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(viewer)
    response = browser.post("/i18n/setlang/", {"language": "es", "next": "/"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 403
    assert "This page has expired" in html and "Reload the page and try again." in html
    assert "CSRF verification failed" not in html
