"""The overview: known scopes (searchable, keyset-paginated), the Derive form, opening a space."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pytest_django.asserts import assertContains

from memconsole.memory.episodes import remember
from memconsole.memory.models import AuditEntry, EpisodeCounts, Scope
from memconsole.memory.scopes import derive_scope, register_scope

from .conftest import htmx

pytestmark = pytest.mark.django_db


def make_scopes(n: int, bot: str = "bot-a") -> list[Scope]:
    return [register_scope(derive_scope(bot, f"group_{i:03d}", "session")) for i in range(n)]


def test_it_lists_known_scopes_with_their_counts(viewer_client, url, scope):
    response = viewer_client.get(url("overview"))
    assertContains(response, f'href="{url("episodes", scope.pk)}">group_100</a>')
    assertContains(response, "3 active, 1 archived, 0 superseded")
    assertContains(response, '<label for="id_q">Find a scope</label>')


def test_it_shows_an_empty_state_without_scopes(viewer_client, url):
    response = viewer_client.get(url("overview"))
    assertContains(response, "No memory spaces yet")


def test_it_finds_a_scope_by_part_of_its_name_or_bot(viewer_client, url, light_scope, other_scope):
    response = viewer_client.get(url("overview"), {"q": "200"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "group_200" in page and "group_100" not in page
    response = viewer_client.get(url("overview"), {"q": "bot-a"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "group_100" in page and "group_200" not in page
    response = viewer_client.get(url("overview"), {"q": "nothing-like-this"})
    assertContains(response, "No memory space matches")


def test_it_hides_scopes_outside_the_users_grants(granted_client, url, light_scope, other_scope):
    response = granted_client.get(url("overview"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "group_200" in page and "group_100" not in page


def test_it_pages_scopes_by_keyset_with_next_and_previous(viewer_client, url):
    make_scopes(30)
    response = viewer_client.get(url("overview"))
    assert response.status_code == 200
    first = response.content.decode()
    assert first.count("<tr>") - 1 >= 25  # header row + 25 (the Advanced table repeats them)
    next_link = re.search(r'<a rel="next" href="\?cursor=(a\d+)"', first)
    assert next_link and 'rel="prev"' not in first
    response = viewer_client.get(url("overview"), {"cursor": next_link.group(1)})
    assert response.status_code == 200
    second = response.content.decode()
    assert "group_000" in second and "group_029" not in second
    previous = re.search(r'<a rel="prev" href="\?cursor=(b\d+)"', second)
    assert previous
    response = viewer_client.get(url("overview"), {"cursor": previous.group(1)})
    assert response.status_code == 200
    back = response.content.decode()
    assert "group_029" in back and "group_000" not in back


def test_it_lists_scopes_without_counting_or_offsets(viewer_client, url):
    make_scopes(30)
    for s in Scope.objects.all():
        EpisodeCounts.objects.create(user_key=s.user_key, active=5)
    with CaptureQueriesContext(connection) as queries:
        assert viewer_client.get(url("overview")).status_code == 200
    sql = " ".join(q["sql"].upper() for q in queries.captured_queries)
    assert "COUNT(" not in sql and "OFFSET" not in sql
    # (the model-switch banner's one read of memory_embeddingstate, memory/reembed.py, is per page, not per row)
    memory = [q for q in queries.captured_queries if "memory_" in q["sql"] and "memory_embeddingstate" not in q["sql"]]
    assert len(memory) <= 3  # grants, one page of scopes, their counters: never one per row


@pytest.mark.parametrize("query", [{"cursor": "zz"}, {"cursor": "a12x"}, {"q": "x" * 300}])
def test_it_answers_400_with_an_inline_error_to_bad_list_input(viewer_client, url, query):
    response = viewer_client.get(url("overview"), query)
    assertContains(response, 'class="form-errors" role="alert"', status_code=400)


def test_it_derives_keys_and_links_to_a_known_scope(viewer_client, url, light_scope):
    response = viewer_client.get(
        url("overview"), {"bot_uuid": "bot-a", "session_name": "group_100", "isolation": "session"}
    )
    assertContains(response, "<code>bot-a:group_100</code>")
    assertContains(response, f'href="{url("episodes", light_scope.pk)}">Open this memory space</a>')


def test_it_derives_bot_isolation_keys(viewer_client, url):
    response = viewer_client.get(url("overview"), {"bot_uuid": "bot-a", "session_name": "person_7", "isolation": "bot"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "<code>bot-a:person_7</code>" in page and "<code>bot:bot-a</code>" in page
    assert "nothing to show" in page  # a viewer cannot open a space nobody used


def test_it_labels_the_derive_fields_exactly(viewer_client, url):
    response = viewer_client.get(url("overview"))
    assertContains(response, '<label for="id_bot_uuid">Bot UUID</label>')
    assertContains(response, '<label for="id_session_name">Session name</label>')
    assertContains(response, '<label for="id_isolation">Isolation</label>')
    assertContains(response, '<button type="submit">Derive</button>')


@pytest.mark.parametrize(
    "query",
    [
        {"bot_uuid": "bot-a", "session_name": "", "isolation": "session"},
        {"bot_uuid": "bad:bot", "session_name": "group_1", "isolation": "session"},
        {"bot_uuid": "bot-a", "session_name": "group_1", "isolation": "planet"},
        {"bot_uuid": "bot-a", "session_name": "x" * 256, "isolation": "session"},
        {"bot_uuid": "bot-a", "session_name": "bad\x07name", "isolation": "session"},
    ],
)
def test_it_answers_400_with_inline_errors_to_a_bad_derive(viewer_client, url, query):
    response = viewer_client.get(url("overview"), query)
    assert response.status_code == 400
    assert 'class="field-error"' in response.content.decode() or 'class="form-errors"' in response.content.decode()


def test_it_refuses_to_derive_a_bot_outside_the_grants(granted_client, url, light_scope):
    response = granted_client.get(
        url("overview"), {"bot_uuid": "bot-a", "session_name": "group_100", "isolation": "session"}
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "You do not have access to this bot" in page and "Open this memory space" not in page


def test_it_answers_htmx_searches_and_derives_with_their_fragments(viewer_client, url, light_scope):
    response = viewer_client.get(url("overview"), {"q": "group"}, **htmx("scope-list"))
    assert response.status_code == 200
    fragment = response.content.decode()
    assert fragment.lstrip().startswith('<div id="scope-list"') and "<html" not in fragment
    response = viewer_client.get(
        url("overview"),
        {"bot_uuid": "bot-a", "session_name": "group_100", "isolation": "session"},
        **htmx("derive-result"),
    )
    assert response.status_code == 200
    derived = response.content.decode()
    assert derived.lstrip().startswith('<div id="derive-result"') and "bot-a:group_100" in derived


def test_it_opens_a_new_chat_of_a_shared_memory_for_an_operator_and_audits_it(operator_client, url, scope, system):
    # bot isolation: bot-a's chats share one memory; group_100's episodes are there under bot isolation too
    remember(derive_scope("bot-a", "group_100", "bot"), system, "shared memory of bot-a")
    response = operator_client.post(
        url("scope_open"), {"bot_uuid": "bot-a", "session_name": "group_9", "isolation": "bot"}
    )
    created = Scope.objects.get(scope_key="bot-a:group_9", isolation="bot")
    assert response.status_code == 302 and response["Location"] == url("episodes", created.pk)
    entry = AuditEntry.objects.get(operation="scope_open")
    assert entry.actor == "user:operator" and entry.scope_key == "bot-a:group_9"


def test_a_refused_space_keeps_the_list_of_spaces_on_the_page(viewer_client, url, light_scope):
    response = viewer_client.post(url("scope_open"), {"bot_uuid": "x", "session_name": "", "isolation": "session"})
    page = response.content.decode()
    assert response.status_code == 400 and "No memory spaces yet" not in page
    assert f'href="{url("episodes", light_scope.pk)}"' in page


def test_it_opens_a_known_space_without_writing(viewer_client, url, light_scope):
    before = AuditEntry.objects.count()
    response = viewer_client.post(
        url("scope_open"), {"bot_uuid": "bot-a", "session_name": "group_100", "isolation": "session"}
    )
    assert response.status_code == 302 and response["Location"] == url("episodes", light_scope.pk)
    assert AuditEntry.objects.count() == before


def test_it_refuses_a_viewer_opening_a_new_space(viewer_client, url):
    response = viewer_client.post(
        url("scope_open"), {"bot_uuid": "bot-z", "session_name": "group_9", "isolation": "session"}
    )
    assert response.status_code == 403
    assert not Scope.objects.filter(scope_key="bot-z:group_9").exists()


def test_it_answers_404_opening_a_space_outside_the_grants(granted_client, url):
    response = granted_client.post(
        url("scope_open"), {"bot_uuid": "bot-a", "session_name": "group_100", "isolation": "session"}
    )
    assert response.status_code == 404


def test_it_answers_400_opening_a_space_with_bad_keys(operator_client, url):
    response = operator_client.post(
        url("scope_open"), {"bot_uuid": "a b", "session_name": "group_9", "isolation": "session"}
    )
    assert response.status_code == 400
    assert not Scope.objects.exists()


def test_it_enforces_csrf_when_opening_a_space(client_for, operator):
    client = client_for(operator, enforce_csrf_checks=True)
    response = client.post("/scopes/open/", {"bot_uuid": "bot-z", "session_name": "group_9", "isolation": "session"})
    assert response.status_code == 403
    assert not Scope.objects.exists()
