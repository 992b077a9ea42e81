"""Headers every console response carries, and who may use the Django admin site."""

from __future__ import annotations

import pytest

from memconsole.console.middleware import CONTENT_SECURITY_POLICY

pytestmark = pytest.mark.django_db


def test_it_sends_a_content_security_policy_without_inline_code(viewer_client):
    response = viewer_client.get("/")
    policy = response.headers["Content-Security-Policy"]
    assert policy == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy


def test_it_turns_off_htmx_inline_indicator_styles(viewer_client):
    assert b'"includeIndicatorStyles": false' in viewer_client.get("/").content


def test_it_lets_an_unrestricted_staff_admin_into_the_admin_site(admin_user, client):
    admin_user.is_staff = True
    admin_user.save()
    client.force_login(admin_user)
    assert client.get("/admin/").status_code == 200


def test_it_keeps_a_bot_limited_admin_out_of_the_admin_site(admin_user, client):
    admin_user.is_staff = True
    admin_user.save()
    admin_user.bot_grants.create(bot_uuid="bot-b")
    client.force_login(admin_user)
    response = client.get("/admin/auth/user/")
    assert response.status_code == 302 and "/admin/login/" in response.headers["Location"]
