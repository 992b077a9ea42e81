"""Two chats of one bot under `bot` isolation (issue 15): chat B's Audit tab, audit export and scope
export with the audit log hold none of chat A's entries (its profile edit, its injection), while
the shared episode's own page still shows its whole history."""

from __future__ import annotations

import json

import pytest

from memconsole.memory import episodes, injection, profiles
from memconsole.memory.models import Scope
from memconsole.memory.scopes import derive_scope

pytestmark = pytest.mark.django_db


@pytest.fixture
def chats(system):
    chat_a = derive_scope("bot-a", "group_1", "bot")
    chat_b = derive_scope("bot-a", "group_2", "bot")
    shared = episodes.remember(chat_a, system, "Chat A plans a trip to Lisbon", sender_id="u1", sender_name="Ann")
    profiles.update_profile(chat_a, system, "session", name="Chat A secret club", add_traits=["private"])
    injection.record_injection(chat_a, system, "Lisbon", sender_id="u1", sender_name="Ann", top_k=3)
    episodes.remember(chat_b, system, "Chat B likes green tea", sender_id="u2", sender_name="Bea")
    episodes.archive(chat_b, system, [shared.episode.episode_id])
    return {
        "a": Scope.objects.get(scope_key=chat_a.scope_key, isolation="bot"),
        "b": Scope.objects.get(scope_key=chat_b.scope_key, isolation="bot"),
        "episode_id": shared.episode.episode_id,
    }


def test_it_shows_only_the_chats_own_entries_in_its_audit_tab(viewer_client, url, chats):
    page = viewer_client.get(url("audit", chats["b"].pk)).content.decode()
    assert "<code>remember</code>" in page
    assert "<code>profile_update</code>" not in page and "<code>inject</code>" not in page
    assert "Chat A secret club" not in page
    page_a = viewer_client.get(url("audit", chats["a"].pk)).content.decode()
    assert "<code>profile_update</code>" in page_a and "<code>inject</code>" in page_a


def _json(response) -> dict:
    assert response.status_code == 200, response.content[:500]
    return json.loads(b"".join(response.streaming_content))


def test_it_exports_only_the_chats_own_entries(admin_client_, url, chats):
    audit_export = _json(admin_client_.post(url("audit_export", chats["b"].pk)))
    scope_export = _json(
        admin_client_.post(url("export_download", chats["b"].pk), {"statuses": ["active"], "include_audit": "on"})
    )
    for document in (audit_export, scope_export["audit"]):
        assert {entry["scope_key"] for entry in document["entries"]} == {"bot-a:group_2"}
        operations = {entry["operation"] for entry in document["entries"]}
        assert "profile_update" not in operations and "inject" not in operations
        assert "Chat A secret club" not in json.dumps(document, ensure_ascii=False)


def test_it_keeps_the_whole_history_on_the_shared_episodes_page(viewer_client, url, chats):
    response = viewer_client.get(url("episode_detail", chats["b"].pk, chats["episode_id"]))
    assert response.status_code == 200
    history = response.content.decode().split('id="history-heading"')[1]
    assert "<code>remember</code>" in history and "<code>archive</code>" in history


def test_it_opens_the_trimmed_space_for_a_session_name_with_spaces_around_it(operator_client, url, system):
    # A space with nothing stored gets its row with its first memory (issue 17: no empty rows).
    response = operator_client.post(
        url("space_first_episode"),
        {
            "bot_uuid": "bot-a",
            "session_name": "group_1001 ",
            "isolation": "session",
            "content": "hi",
            "importance": "2",
        },
    )
    assert response.status_code == 302
    assert list(Scope.objects.values_list("scope_key", "session_name")) == [("bot-a:group_1001", "group_1001")]
