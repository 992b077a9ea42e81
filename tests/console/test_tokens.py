"""The Bot tokens screen: the list with last use, creating a token (its secret shown once) and revoking
one; admin role only, audited, and an admin limited to some bots reaches those bots' tokens only."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from memconsole.memory import tokens
from memconsole.memory.models import AuditEntry, BotGrant, BotToken
from memconsole.memory.roles import ADMIN
from tests.conftest import PASSWORD

from .conftest import htmx

pytestmark = pytest.mark.django_db


@pytest.fixture
def bot_a_token(system):
    token, _secret = tokens.create_token("support bot", ["bot-a"], system)
    BotToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token


@pytest.fixture
def limited_admin(db):
    """An admin limited to bot-b."""
    user = User.objects.create_user("limited-admin", password=PASSWORD)
    user.groups.add(Group.objects.get(name=ADMIN))
    BotGrant.objects.create(user=user, bot_uuid="bot-b")
    return user


def test_it_lists_the_tokens_with_their_bots_and_last_use(admin_client_, url, bot_a_token, system):
    tokens.create_token("unused", ["bot-b"], system)
    page = admin_client_.get(url("tokens")).content.decode()
    assert "support bot" in page and f"mct_{bot_a_token.prefix}_…" in page and "<code>bot-a</code>" in page
    assert page.count("<time datetime=") >= 3  # two created, one last used
    assert "never" in page  # the unused one
    assert bot_a_token.token_hash not in page


def test_it_creates_a_token_and_shows_its_secret_once(admin_client_, url):
    response = admin_client_.post(url("tokens"), {"name": "faq bot", "bot_uuids": "bot-a, bot-b"})
    assert response.status_code == 200
    page = response.content.decode()
    secret = page.split('id="token-secret" class="secret">')[1].split("<")[0]
    token = tokens.authenticate(secret)
    assert token is not None and token.name == "faq bot" and token.bot_uuids == ["bot-a", "bot-b"]
    assert 'data-copy="token-secret"' in page and "shown only this once" in page
    entry = AuditEntry.objects.get(operation="token_create")
    assert entry.actor == "user:admin" and entry.target_id == token.prefix and secret not in str(entry.payload)
    assert secret not in admin_client_.get(url("tokens")).content.decode()
    assert "no-store" in response["Cache-Control"]


def test_it_answers_htmx_with_the_tokens_fragment(admin_client_, url):
    response = admin_client_.post(url("tokens"), {"name": "faq bot", "bot_uuids": "bot-a"}, **htmx("tokens"))
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="tokens"') and "<html" not in html and "mct_" in html


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"name": "", "bot_uuids": "bot-a"}, "This field is required."),
        ({"name": "x", "bot_uuids": ""}, "This field is required."),
        ({"name": "x", "bot_uuids": "bot a"}, "Each bot is a bot UUID"),
        ({"name": "n" * 101, "bot_uuids": "bot-a"}, "at most 100 characters"),
    ],
)
def test_it_refuses_a_bad_token_form_with_the_reason(admin_client_, url, data, error):
    response = admin_client_.post(url("tokens"), data)
    assert response.status_code == 400 and error in response.content.decode()
    assert not BotToken.objects.exists()


def test_it_revokes_a_token_and_audits_it(admin_client_, url, bot_a_token):
    response = admin_client_.post(url("token_revoke", bot_a_token.pk))
    assert response.status_code == 302 and response["Location"] == url("tokens")
    bot_a_token.refresh_from_db()
    assert bot_a_token.revoked_at is not None
    assert AuditEntry.objects.filter(operation="token_revoke", target_id=bot_a_token.prefix).count() == 1
    again = admin_client_.post(url("token_revoke", bot_a_token.pk), follow=True)
    assert "was already revoked" in again.content.decode()
    assert AuditEntry.objects.filter(operation="token_revoke").count() == 1


def test_it_answers_an_htmx_revoke_with_the_row(admin_client_, url, bot_a_token):
    response = admin_client_.post(url("token_revoke", bot_a_token.pk), **htmx())
    html = response.content.decode()
    assert html.startswith(f'<tr id="token-{bot_a_token.prefix}"') and "Revoked just now." in html
    assert "<html" not in html and "hx-post" not in html  # no revoke button left


@pytest.mark.parametrize("client_name", ["viewer_client", "operator_client"])
def test_it_refuses_the_token_screen_to_roles_below_admin(request, url, client_name, bot_a_token):
    client = request.getfixturevalue(client_name)
    assert client.get(url("tokens")).status_code == 403
    assert client.post(url("tokens"), {"name": "x", "bot_uuids": "bot-a"}).status_code == 403
    assert client.post(url("token_revoke", bot_a_token.pk)).status_code == 403
    assert BotToken.objects.count() == 1 and BotToken.objects.get().revoked_at is None


def test_it_sends_anonymous_callers_to_the_login(client, url, bot_a_token):
    assert client.get(url("tokens"))["Location"].startswith("/accounts/login/")
    assert client.post(url("token_revoke", bot_a_token.pk))["Location"].startswith("/accounts/login/")


def test_it_answers_405_to_a_revoke_by_get_and_404_to_an_unknown_token(admin_client_, url, bot_a_token):
    assert admin_client_.get(url("token_revoke", bot_a_token.pk)).status_code == 405
    assert admin_client_.post(url("token_revoke", 999_999)).status_code == 404


def test_it_keeps_an_admin_limited_to_some_bots_to_their_tokens(client_for, url, bot_a_token, limited_admin):
    client = client_for(limited_admin)
    assert f"token-{bot_a_token.prefix}" not in client.get(url("tokens")).content.decode()
    assert client.post(url("token_revoke", bot_a_token.pk)).status_code == 404  # another bot's token
    response = client.post(url("tokens"), {"name": "sneaky", "bot_uuids": "bot-a"})
    assert response.status_code == 400 and "You have no access to bot bot-a" in response.content.decode()
    assert client.post(url("tokens"), {"name": "own", "bot_uuids": "bot-b"}).status_code == 200
    assert sorted(BotToken.objects.values_list("name", flat=True)) == ["own", "support bot"]


def test_it_enforces_csrf_on_token_changes(client_for, admin_user, url, bot_a_token):
    client = client_for(admin_user, enforce_csrf_checks=True)
    assert client.post(url("tokens"), {"name": "x", "bot_uuids": "bot-a"}).status_code == 403
    assert client.post(url("token_revoke", bot_a_token.pk)).status_code == 403
    assert BotToken.objects.count() == 1 and not AuditEntry.objects.filter(operation="token_revoke").exists()
