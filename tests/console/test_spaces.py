"""One row per memory space (issue 17): a bot-isolation memory is listed once with its chats
beneath; deriving and opening a space never creates an empty row; an empty space can be removed."""

from __future__ import annotations

import pytest

from memconsole.memory import profiles, spaces
from memconsole.memory.episodes import remember
from memconsole.memory.models import AuditEntry, Scope
from memconsole.memory.scopes import derive_scope, register_scope

from .conftest import htmx

pytestmark = pytest.mark.django_db


@pytest.fixture
def bot_chats(db, system):
    """bot-s under bot isolation: four chats sharing one memory of two episodes."""
    for n in range(4):
        keys = derive_scope("bot-s", f"group_{n}", "bot")
        register_scope(keys)
    remember(
        derive_scope("bot-s", "group_0", "bot"), system, "The office moved to Lyon", sender_id="u1", sender_name="Alice"
    )
    remember(derive_scope("bot-s", "group_3", "bot"), system, "Bob likes jazz", sender_id="u2", sender_name="Bob")
    return list(Scope.objects.filter(bot_uuid="bot-s").order_by("session_name"))


def test_it_lists_a_shared_memory_once_with_its_chats_beneath(viewer_client, url, bot_chats):
    page = viewer_client.get(url("overview")).content.decode()
    assert page.count("2 active, 0 archived, 0 superseded") == 1
    assert "Shared memory of 4 chats" in page
    for chat in bot_chats:
        assert f'href="{url("episodes", chat.pk)}">{chat.session_name}</a>' in page


def test_it_finds_a_space_by_user_key_and_by_speaker(viewer_client, url, bot_chats, scope):
    by_key = viewer_client.get(url("overview", query="q=bot:bot-s"), **htmx()).content.decode()
    assert "Shared memory of 4 chats" in by_key and "group_100" not in by_key
    by_name = viewer_client.get(url("overview", query="q=bob"), **htmx()).content.decode()
    assert "<html" not in by_name
    assert "Shared memory of 4 chats" in by_name and "group_100" in by_name  # Bob speaks in both
    by_id = viewer_client.get(url("overview", query="q=u1")).content.decode()
    assert "Shared memory of 4 chats" in by_id


def test_it_opens_a_space_with_nothing_stored_without_creating_a_row(operator_client, url):
    body = {"bot_uuid": "bot-z", "session_name": "group_9", "isolation": "session"}
    derived = operator_client.get(url("overview", query="bot_uuid=bot-z&session_name=group_9&isolation=session"))
    assert derived.status_code == 200
    response = operator_client.post(url("scope_open"), body)
    assert response.status_code == 200
    assert b"Nothing is stored in this memory space yet" in response.content
    assert not Scope.objects.exists() and not AuditEntry.objects.exists()
    first = operator_client.post(url("space_first_episode"), {**body, "content": "Hello", "importance": "3"})
    created = Scope.objects.get(scope_key="bot-z:group_9")
    assert first.status_code == 302 and f"/scopes/{created.pk}/episodes/" in first["Location"]
    assert AuditEntry.objects.get().operation == "remember"


def test_it_refuses_a_first_episode_to_a_viewer_and_outside_the_grants(viewer_client, client_for, operator, url):
    body = {"bot_uuid": "bot-a", "session_name": "group_9", "isolation": "session", "content": "x", "importance": "2"}
    assert viewer_client.post(url("space_first_episode"), body).status_code == 403
    operator.bot_grants.create(bot_uuid="bot-b")
    assert client_for(operator).post(url("space_first_episode"), body).status_code == 404
    assert not Scope.objects.exists()


def test_it_removes_an_empty_space_for_an_admin_audited(admin_client_, url):
    empty = register_scope(derive_scope("bot-a", "group_9"))
    page = admin_client_.get(url("overview")).content.decode()
    assert url("scope_remove", empty.pk) in page
    response = admin_client_.post(url("scope_remove", empty.pk))
    assert response.status_code == 302
    assert not Scope.objects.filter(pk=empty.pk).exists()
    entry = AuditEntry.objects.get(operation="scope_remove")
    assert entry.scope_key == "bot-a:group_9" and entry.actor == "user:admin"


def test_it_offers_no_removal_of_a_space_whose_only_memory_is_a_profile(admin_client_, url, system):
    # after an erasure left a chat with its session profile only, the button was offered and refused (400)
    keys = derive_scope("bot-a", "group_9")
    profiles.update_profile(keys, system, "session", name="杨帆 (private chat)")
    space = Scope.objects.get(scope_key=keys.scope_key)
    page = admin_client_.get(url("overview")).content.decode()
    assert "group_9" in page and url("scope_remove", space.pk) not in page


def test_it_refuses_to_remove_a_space_holding_memory(admin_client_, url, scope):
    response = admin_client_.post(url("scope_remove", scope.pk), **htmx())
    assert response.status_code == 400 and b"<html" not in response.content
    assert Scope.objects.filter(pk=scope.pk).exists()
    chinese = admin_client_.post(url("scope_remove", scope.pk), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "此记忆空间不为空" in chinese.content.decode()


def test_it_lets_only_an_admin_remove_a_space_and_hides_other_bots(operator_client, granted_client, url):
    empty = register_scope(derive_scope("bot-a", "group_9"))
    assert operator_client.post(url("scope_remove", empty.pk)).status_code == 403
    assert granted_client.post(url("scope_remove", empty.pk)).status_code == 404
    assert Scope.objects.filter(pk=empty.pk).exists()


def test_open_scope_registers_a_new_chat_of_a_memory_that_holds_something(bot_chats, system):
    keys = derive_scope("bot-s", "group_new", "bot")
    opened = spaces.open_scope(keys, system)
    assert opened is not None and opened.scope_key == "bot-s:group_new"
    assert AuditEntry.objects.filter(operation="scope_open", scope_key="bot-s:group_new").count() == 1
    assert spaces.open_scope(derive_scope("bot-q", "group_1"), system) is None
