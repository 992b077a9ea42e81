"""Every console URL: login required, methods enforced, never cached, grants and roles applied."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from pytest_django.asserts import assertContains

from memconsole.memory.episodes import list_episodes
from memconsole.memory.injection import record_injection
from memconsole.memory.models import Episode, InjectionSnapshot

from .conftest import htmx

pytestmark = pytest.mark.django_db


@pytest.fixture
def snapshot(scope, keys, system) -> InjectionSnapshot:
    return record_injection(keys, system, "where is the trip", sender_id="u1", sender_name="Alice").snapshot


def console_urls(url, scope, episode_id, snapshot_id):
    """(method, url) of every console view that takes the scope."""
    s = scope.pk
    return [
        ("get", url("scope", s)),
        ("get", url("profiles", s)),
        ("get", url("profile_detail", s, "session")),
        ("post", url("profile_edit", s, "session")),
        ("post", url("profile_rollback", s, "session")),
        ("get", url("episodes", s)),
        ("post", url("episodes_bulk", s)),
        ("get", url("episode_detail", s, episode_id)),
        ("post", url("episode_archive", s, episode_id)),
        ("post", url("episode_restore", s, episode_id)),
        ("post", url("episode_delete", s, episode_id)),
        ("get", url("injection", s)),
        ("get", url("injection_detail", s, snapshot_id)),
        ("get", url("audit", s)),
        ("post", url("audit_export", s)),
        ("get", url("export", s)),
        ("post", url("export_download", s)),
    ]


def global_urls(url):
    return [
        ("get", url("overview")),
        ("post", url("scope_open")),
        ("get", url("import")),
        ("get", url("diagnostics")),
        ("post", url("diagnostics_run")),
    ]


def test_it_redirects_anonymous_users_to_the_login_page_from_every_console_url(
    client, url, scope, scope_with_episodes, snapshot
):
    urls = console_urls(url, scope, scope_with_episodes[0].episode_id, snapshot.snapshot_id) + global_urls(url)
    for method, address in urls:
        response = getattr(client, method)(address)
        assert response.status_code == 302, address
        assert response["Location"].startswith("/accounts/login/?next="), address


def test_it_answers_405_to_the_wrong_method_on_every_console_url(
    admin_client_, url, scope, scope_with_episodes, snapshot
):
    urls = console_urls(url, scope, scope_with_episodes[0].episode_id, snapshot.snapshot_id) + global_urls(url)
    for method, address in urls:
        if address == url("import"):
            continue  # a form view: GET shows it, POST uploads; PUT is the wrong method below
        wrong = "post" if method == "get" else "get"
        assert getattr(admin_client_, wrong)(address).status_code == 405, address
    assert admin_client_.put(url("import")).status_code == 405


def test_a_browser_opening_a_form_only_address_gets_a_page_with_a_way_back(
    admin_client_, url, scope, scope_with_episodes, snapshot
):
    # reloading the page a failed form left (its address takes POST only) showed an empty page
    urls = console_urls(url, scope, scope_with_episodes[0].episode_id, snapshot.snapshot_id) + global_urls(url)
    form_only = [address for method, address in urls if method == "post" and address != url("import")]
    assert url("token_revoke", 1) not in form_only  # (checked on its own below: no token exists here)
    for address in [*form_only, url("token_revoke", 1)]:
        response = admin_client_.get(address, HTTP_ACCEPT="text/html,application/xhtml+xml")
        page = response.content.decode()
        assert response.status_code == 405 and response["Allow"] == "POST", address
        assert "This address only receives a form sent from the console" in page, address
        back = re.search(r'<a href="([^"]+)">Go to the page</a>', page).group(1)
        assert address.startswith(back) and back != address, (address, back)
        assert admin_client_.get(back).status_code == 200, back
    assert admin_client_.get(form_only[0]).content == b""  # a client that asks for no page gets none
    page_only = admin_client_.post(url("speaker_options", scope.pk), HTTP_ACCEPT="text/html")
    assert page_only.status_code == 405 and b"only receives a form" not in page_only.content  # the reverse case


def test_it_answers_404_for_a_scope_outside_the_users_grants_on_every_url(
    granted_client, url, scope, scope_with_episodes, snapshot
):
    for method, address in console_urls(url, scope, scope_with_episodes[0].episode_id, snapshot.snapshot_id):
        assert getattr(granted_client, method)(address).status_code == 404, address


def test_it_answers_404_for_a_scope_that_does_not_exist(admin_client_, url):
    assert admin_client_.get(url("episodes", 999999)).status_code == 404
    assert admin_client_.post(url("episode_archive", 999999, "0123456789ab")).status_code == 404


def test_it_answers_404_for_another_scopes_episode_and_snapshot(
    admin_client_, url, scope, other_scope, other_keys, system
):
    foreign = list_episodes(other_keys).episodes[0]
    foreign_snapshot = record_injection(other_keys, system, "blue door").snapshot
    for method, address in [
        ("get", url("episode_detail", scope.pk, foreign.episode_id)),
        ("post", url("episode_archive", scope.pk, foreign.episode_id)),
        ("post", url("episode_restore", scope.pk, foreign.episode_id)),
        ("post", url("episode_delete", scope.pk, foreign.episode_id)),
        ("get", url("injection_detail", scope.pk, foreign_snapshot.snapshot_id)),
    ]:
        assert (
            getattr(admin_client_, method)(address, {"confirmed": "1"} if method == "post" else None).status_code == 404
        ), address
    foreign.refresh_from_db()
    assert foreign.status == "active"


def test_it_lets_a_granted_user_read_their_own_bots_scope(granted_client, url, other_scope):
    response = granted_client.get(url("episodes", other_scope.pk))
    assertContains(response, "Bot B remembers the blue door")


def test_it_refuses_users_without_any_role(client_for, db, url, scope):
    client = client_for(User.objects.create_user("nobody", password="x"))
    assert client.get(url("overview")).status_code == 403
    assert client.get(url("episodes", scope.pk)).status_code == 403
    assert client.get(url("diagnostics")).status_code == 403


@pytest.mark.parametrize(
    ("name", "perm_args"),
    [
        ("episode_archive", "episode"),
        ("episode_restore", "episode"),
        ("episode_delete", "episode"),
        ("profile_edit", "session"),
        ("profile_rollback", "session"),
        ("audit_export", None),
        ("export_download", None),
    ],
)
def test_it_answers_403_to_a_viewer_for_every_change_and_export(viewer_client, url, light_scope, name, perm_args):
    args = [light_scope.pk]
    if perm_args == "episode":
        args.append(Episode.objects.first().episode_id)
    elif perm_args:
        args.append(perm_args)
    assert viewer_client.post(url(name, *args), {"confirmed": "1", "version": "1"}).status_code == 403


def test_it_answers_403_to_an_operator_for_delete_export_and_import(operator_client, url, scope, scope_with_episodes):
    episode_id = scope_with_episodes[0].episode_id
    assert operator_client.post(url("episode_delete", scope.pk, episode_id), {"confirmed": "1"}).status_code == 403
    assert operator_client.post(url("export_download", scope.pk), {"statuses": ["active"]}).status_code == 403
    assert operator_client.post(url("audit_export", scope.pk)).status_code == 403
    assert operator_client.get(url("import")).status_code == 403
    assert Episode.objects.filter(episode_id=episode_id).exists()


def test_it_marks_console_pages_never_cached_and_varied_on_htmx(viewer_client, url, scope):
    for address in (url("overview"), url("episodes", scope.pk), url("diagnostics")):
        response = viewer_client.get(address)
        assert "no-cache" in response["Cache-Control"] and "no-store" in response["Cache-Control"], address
        assert "HX-Request" in response["Vary"], address


def test_it_answers_htmx_requests_with_fragments_only(admin_client_, url, scope, scope_with_episodes, snapshot):
    pages = [
        url("overview"),
        url("episode_detail", scope.pk, scope_with_episodes[0].episode_id),
        url("injection_detail", scope.pk, snapshot.snapshot_id),
        url("export", scope.pk),
        url("import"),
        url("profiles", scope.pk),
        url("profile_detail", scope.pk, "session"),
        url("episodes", scope.pk),
        url("injection", scope.pk),
        url("audit", scope.pk),
        url("diagnostics"),
    ]
    for address in pages:
        full = admin_client_.get(address)
        fragment = admin_client_.get(address, **htmx())
        assert full.status_code == fragment.status_code == 200, address
        assert b"<html" in full.content, address
        assert b"<html" not in fragment.content and b"<body" not in fragment.content, address
        assert b"swap-region" in fragment.content, address


def test_it_answers_bad_htmx_requests_with_a_fragment_too(admin_client_, url, scope, scope_with_episodes):
    for address, data in [
        (url("injection", scope.pk), {"cursor": "bad"}),
        (url("profiles", scope.pk), {"cursor": "bad"}),
        (url("diagnostics"), {"cursor": "bad"}),
    ]:
        response = admin_client_.get(address, data, **htmx())
        assert response.status_code == 400 and b"<html" not in response.content, address
        assert b'class="form-errors" role="alert"' in response.content, address
    response = admin_client_.post(url("episode_delete", scope.pk, scope_with_episodes[0].episode_id), **htmx())
    assert response.status_code == 200 and b"<html" not in response.content and b'name="confirmed"' in response.content
    response = admin_client_.post(url("export_download", scope.pk), {}, **htmx())
    assert response.status_code == 400 and b"<html" not in response.content
    response = admin_client_.post(url("scope_open"), {"session_name": ""}, **htmx())
    assert response.status_code == 400 and b"<html" not in response.content
