"""Headers every console response carries, and who may use the Django admin site."""

from __future__ import annotations

import pytest
from pytest_django.asserts import assertContains

from memconsole.console.middleware import CONTENT_SECURITY_POLICY, client_ip
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def test_it_sends_a_content_security_policy_without_inline_code(viewer_client):
    response = viewer_client.get("/")
    policy = response.headers["Content-Security-Policy"]
    assert policy == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy


def test_it_turns_off_htmx_inline_indicator_styles(viewer_client):
    assertContains(viewer_client.get("/"), b'"includeIndicatorStyles": false')


def test_it_lets_an_unrestricted_staff_admin_into_the_admin_site(admin_user, client_for):
    admin_user.is_staff = True
    admin_user.save()
    assert client_for(admin_user).get("/admin/").status_code == 200


def test_it_keeps_a_bot_limited_admin_out_of_the_admin_site(admin_user, client_for):
    admin_user.is_staff = True
    admin_user.save()
    admin_user.bot_grants.create(bot_uuid="bot-b")
    response = client_for(admin_user).get("/admin/auth/user/")
    assert response.status_code == 302 and "/admin/login/" in response.headers["Location"]


def test_it_serves_no_anonymous_password_reset_pages(client):
    assert client.get("/accounts/password_reset/").status_code == 404
    assert client.get("/accounts/login/").status_code == 200


def test_it_counts_logins_by_the_forwarded_address_only_behind_a_proxy(settings, rf):
    request = rf.get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.7")
    settings.MEMCONSOLE_BEHIND_PROXY = False
    assert client_ip(request) == "10.0.0.1"  # a client cannot pick its address without a proxy
    settings.MEMCONSOLE_BEHIND_PROXY = True
    settings.MEMCONSOLE_PROXY_COUNT = 1
    assert client_ip(request) == "203.0.113.7"  # what our proxy appended, not what the client sent
    settings.MEMCONSOLE_PROXY_COUNT = 2
    assert client_ip(request) == "6.6.6.6"
    settings.MEMCONSOLE_PROXY_COUNT = 3
    assert client_ip(request) == "10.0.0.1"


def test_it_locks_out_one_client_behind_a_proxy_without_locking_out_the_others(settings, viewer, client):
    settings.MEMCONSOLE_BEHIND_PROXY = True
    settings.AXES_FAILURE_LIMIT = 2
    for _ in range(2):
        client.post(
            "/accounts/login/", {"username": "viewer", "password": "wrong"}, HTTP_X_FORWARDED_FOR="198.51.100.1"
        )
    locked = client.post(
        "/accounts/login/", {"username": "viewer", "password": PASSWORD}, HTTP_X_FORWARDED_FOR="198.51.100.1"
    )
    assert locked.status_code == 429
    other = client.post(
        "/accounts/login/", {"username": "viewer", "password": PASSWORD}, HTTP_X_FORWARDED_FOR="198.51.100.2"
    )
    assert other.status_code == 302
