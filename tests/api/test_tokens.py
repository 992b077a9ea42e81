"""Tokens: shown once, stored hashed, limited to their bots, listed and revoked (commands and admin)."""

from __future__ import annotations

import hashlib
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from pytest_django.asserts import assertContains

from memconsole.memory import tokens
from memconsole.memory.audit import Actor, verify_audit_chain
from memconsole.memory.errors import ValidationError
from memconsole.memory.models import AuditEntry, BotToken

from .conftest import SCOPE_A, Api

pytestmark = pytest.mark.django_db


def test_it_stores_only_a_hash_of_the_secret(token_a):
    row, secret = token_a
    assert secret.startswith(f"mct_{row.prefix}_") and len(secret) > 40
    assert row.token_hash == hashlib.sha256(secret.encode()).hexdigest()
    stored = BotToken.objects.filter(pk=row.pk).values()[0]
    assert not any(secret in str(value) for value in stored.values())
    assert tokens.authenticate(secret) == row
    assert tokens.authenticate(secret + "x") is None
    assert tokens.authenticate(secret.replace(row.prefix, "00000000")) is None


def test_it_audits_token_creation_and_revocation(token_a):
    row, _ = token_a
    assert tokens.revoke(row, Actor.system("tests")) is True
    assert tokens.revoke(row, Actor.system("tests")) is False
    operations = list(AuditEntry.objects.filter(target_id=row.prefix).values_list("operation", flat=True))
    assert operations == ["token_create", "token_revoke"]
    assert verify_audit_chain().ok


@pytest.mark.parametrize("bots", [[], [""], ["bot:a"], ["bot a"], ["x" * 129]])
def test_it_refuses_tokens_without_valid_bots(bots):
    with pytest.raises(ValidationError):
        tokens.create_token("bad", bots, Actor.system("tests"))


def test_it_creates_a_token_from_the_command_and_prints_it_once():
    out, err = StringIO(), StringIO()
    call_command(
        "create_bot_token", "langbot", "--bot", "bot-a", "--bot", "bot-b", "--bot", "bot-a", stdout=out, stderr=err
    )
    secret = out.getvalue().strip()
    row = BotToken.objects.get()
    assert (row.name, row.bot_uuids) == ("langbot", ["bot-a", "bot-b"])
    assert tokens.authenticate(secret) == row
    assert "not shown again" in err.getvalue()
    assert Api(secret).post("recall", {**SCOPE_A, "query": "hello"}).status_code == 200


def test_it_refuses_a_bad_bot_in_the_create_command():
    with pytest.raises(CommandError, match="bot_uuid"):
        call_command("create_bot_token", "bad", "--bot", "a:b", stdout=StringIO(), stderr=StringIO())


def test_it_lists_tokens_without_secrets(token_a, token_b):
    tokens.revoke(token_b[0], Actor.system("tests"))
    out = StringIO()
    call_command("list_bot_tokens", stdout=out)
    text = out.getvalue()
    assert token_a[0].prefix in text and token_b[0].prefix in text and "revoked" in text
    assert token_a[1] not in text and token_a[0].token_hash not in text
    assert "2 token(s)" in text
    out = StringIO()
    call_command("list_bot_tokens", "--active", stdout=out)
    assert token_b[0].prefix not in out.getvalue()


def test_it_revokes_a_token_from_the_command(api, token_a):
    assert api.post("recall", {**SCOPE_A, "query": "x"}).status_code == 200
    out = StringIO()
    call_command("revoke_bot_token", f"mct_{token_a[0].prefix}", stdout=out)
    assert "revoked" in out.getvalue()
    assert api.post("recall", {**SCOPE_A, "query": "x"}).status_code == 401
    out = StringIO()
    call_command("revoke_bot_token", token_a[0].prefix, stdout=out)
    assert "already revoked" in out.getvalue()
    with pytest.raises(CommandError, match="no token"):
        call_command("revoke_bot_token", "ffffffff", stdout=StringIO())


def test_it_revokes_tokens_from_the_admin(client_for, api, token_a, token_b):
    staff = User.objects.create_superuser("root", password="x")
    client = client_for(staff)
    listing = client.get("/admin/memory/bottoken/")
    assert listing.status_code == 200 and token_a[0].prefix.encode() in listing.content
    assert token_a[1].encode() not in listing.content
    response = client.post(
        "/admin/memory/bottoken/", {"action": "revoke_tokens", "_selected_action": [token_a[0].pk]}, follow=True
    )
    assert response.status_code == 200
    assert BotToken.objects.get(pk=token_a[0].pk).revoked_at is not None
    assert BotToken.objects.get(pk=token_b[0].pk).revoked_at is None
    assert AuditEntry.objects.get(operation="token_revoke").actor == "user:root"
    assert api.post("recall", {**SCOPE_A, "query": "x"}).status_code == 401
    assert client.get("/admin/memory/bottoken/add/").status_code == 403


def test_it_lets_the_admin_role_revoke_but_not_a_viewer(client_for, admin_user, viewer, token_a, token_b):
    for user, token, allowed in ((viewer, token_b[0], False), (admin_user, token_a[0], True)):
        user.is_staff = True
        user.save()
        client = client_for(user)
        client.post("/admin/memory/bottoken/", {"action": "revoke_tokens", "_selected_action": [token.pk]})
        token.refresh_from_db()
        assert (token.revoked_at is not None) is allowed


def test_it_shows_grants_scopes_and_audit_in_the_admin(client_for, api):
    admin_client = client_for(User.objects.create_superuser("root", password="x"))
    assert api.post("remember", {**SCOPE_A, "content": "visible in the admin"}).status_code == 201
    for url in ("/admin/memory/botgrant/", "/admin/memory/scope/", "/admin/memory/auditentry/"):
        response = admin_client.get(url)
        assert response.status_code == 200, url
    assertContains(admin_client.get("/admin/memory/scope/"), b"bot-a:group_100")
    entry = AuditEntry.objects.get(operation="remember")
    page = admin_client.get(f"/admin/memory/auditentry/{entry.pk}/change/")
    assert page.status_code == 200 and b"visible in the admin" not in page.content  # no payloads here
    assert admin_client.post(f"/admin/memory/auditentry/{entry.pk}/delete/").status_code == 403
