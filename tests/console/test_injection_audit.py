"""The Injection tab (latest snapshot, history, detail) and the Audit tab (filters, pages, export)."""

from __future__ import annotations

import json
import re

import pytest
from django.db import transaction
from django.utils.html import escape
from pytest_django.asserts import assertContains, assertNotContains

from memconsole.memory import audit
from memconsole.memory.episodes import remember
from memconsole.memory.injection import record_injection
from memconsole.memory.models import AuditEntry, InjectionSnapshot, Scope
from memconsole.memory.scopes import derive_scope
from tests.factories import profile

from .conftest import htmx

pytestmark = pytest.mark.django_db


@pytest.fixture
def injection(scope, keys, system):
    profile(keys, name="Travel club", traits=["friendly"])
    return record_injection(keys, system, "Where is Alice going?", query_id="q-1", sender_id="u1", sender_name="Alice")


def test_it_shows_the_latest_injection_with_the_system_blocks_exactly_as_sent(viewer_client, url, scope, injection):
    response = viewer_client.get(url("injection", scope.pk))
    page = response.content.decode()
    assert "Latest injection" in page and "<code>q-1</code>" in page
    blocks = re.findall(r'<pre class="system-block">(.*?)</pre>', page, re.S)
    assert blocks  # each block shown once in the latest snapshot
    assert blocks == [escape(block) for block in injection.system_blocks]
    assert "[Session profile]" in page and "Travel club" in page
    assertContains(response, f'href="{url("injection_detail", scope.pk, injection.snapshot.snapshot_id)}"')


def test_it_shows_an_empty_injection_tab(viewer_client, url, light_scope):
    response = viewer_client.get(url("injection", light_scope.pk))
    assertContains(response, "No injection has been recorded for this space yet.")


def test_it_pages_the_injection_history(viewer_client, url, light_scope, keys, system):
    for i in range(23):
        InjectionSnapshot.objects.create(
            snapshot_id=f"{i:032x}",
            session_name=keys.session_name,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            isolation=keys.isolation,
            speaker_id=f"speaker-{i}",
        )
    response = viewer_client.get(url("injection", light_scope.pk))
    assert response.status_code == 200
    page = response.content.decode()
    assert "speaker-22" in page and "speaker-2<" not in page
    cursor = re.search(r'<a rel="next" href="\?cursor=(a\d+)"', page).group(1)
    older = viewer_client.get(url("injection", light_scope.pk), {"cursor": cursor}, **htmx("injection-history"))
    assert b"<html" not in older.content and b"speaker-0<" in older.content and b"speaker-22" not in older.content


def test_it_shows_one_snapshot_with_its_episodes_and_scores(viewer_client, url, scope, injection):
    response = viewer_client.get(url("injection_detail", scope.pk, injection.snapshot.snapshot_id))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Injection snapshot" in page and "Where is Alice going?" in page
    for hit in injection.hits:
        assert hit.episode.episode_id in page


def test_it_answers_400_to_a_bad_injection_cursor(viewer_client, url, light_scope):
    assert viewer_client.get(url("injection", light_scope.pk), {"cursor": "zzz"}).status_code == 400


def test_it_answers_404_to_another_scopes_snapshot(viewer_client, url, light_scope, other_scope, other_keys, system):
    foreign = record_injection(other_keys, system, "blue door").snapshot
    assert viewer_client.get(url("injection_detail", light_scope.pk, foreign.snapshot_id)).status_code == 404
    assert viewer_client.get(url("injection_detail", light_scope.pk, "0" * 32)).status_code == 404


# --- audit --------------------------------------------------------------------------------------


def test_it_lists_the_scopes_audit_entries_with_before_and_after(viewer_client, url, scope, other_scope):
    response = viewer_client.get(url("audit", scope.pk))
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count("<code>remember</code>") == 4 and "<code>archive</code>" in page
    assert "Bot B remembers" not in page  # another scope's entries
    assert "Before and after" in page and "&quot;status&quot;: &quot;archived&quot;" in page


def test_it_filters_the_audit_log_by_operation_and_actor(
    viewer_client, operator_client, url, scope, scope_with_episodes
):
    operator_client.post(url("episode_archive", scope.pk, scope_with_episodes[0].episode_id))
    response = viewer_client.get(url("audit", scope.pk), {"operation": "archive"})
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count("<code>archive</code>") == 2 and "<code>remember</code>" not in page
    response = viewer_client.get(url("audit", scope.pk), {"actor": "operator"})
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count("<code>archive</code>") == 1 and "user:operator" in page
    response = viewer_client.get(url("audit", scope.pk), {"operation": "erase"})
    assertContains(response, "No audit entry matches these filters.")


def test_it_pages_the_audit_log_by_sequence(viewer_client, url, light_scope, keys, system):
    with transaction.atomic():
        for i in range(30):
            audit.append(
                "remember",
                system,
                scope_key=keys.scope_key,
                user_key=keys.user_key,
                target_type="episode",
                target_id=f"t{i:02d}",
                summary=f"entry {i}",
            )
    response = viewer_client.get(url("audit", light_scope.pk))
    assert response.status_code == 200
    page = response.content.decode()
    assert "<code>t29</code>" in page and "<code>t04</code>" not in page
    cursor = re.search(r'<a rel="next" href="\?cursor=(a\d+)"', page).group(1)
    response = viewer_client.get(url("audit", light_scope.pk), {"cursor": cursor})
    assert response.status_code == 200
    page = response.content.decode()
    assert "<code>t04</code>" in page and "<code>t29</code>" not in page


@pytest.mark.parametrize("query", [{"cursor": "x"}, {"operation": "o" * 41}, {"actor": "a" * 256}])
def test_it_answers_400_to_bad_audit_filters(viewer_client, url, light_scope, query):
    response = viewer_client.get(url("audit", light_scope.pk), query)
    assert response.status_code == 400 and b'class="form-errors"' in response.content


def test_it_answers_htmx_with_the_audit_fragment(viewer_client, url, scope):
    response = viewer_client.get(url("audit", scope.pk), {"operation": "remember"}, **htmx("audit-list"))
    assert response.content.decode().lstrip().startswith('<div id="audit-list"') and b"<html" not in response.content


def test_it_exports_the_audit_log_as_json_and_audits_the_export(admin_client_, url, scope):
    response = admin_client_.post(url("audit_export", scope.pk))
    assert response.status_code == 200 and response["Content-Type"].startswith("application/json")
    assert response["Content-Disposition"].startswith('attachment; filename="memconsole-audit-')
    document = json.loads(b"".join(response.streaming_content))
    assert document["version"] == 1 and document["scope_key"] == "bot-a:group_100"
    assert document["count"] == len(document["entries"]) == 6  # 4 remember, 1 archive, the export itself
    assert AuditEntry.objects.filter(operation="audit_export", actor="user:admin").exists()


def test_it_offers_the_audit_export_only_to_roles_that_may_export(viewer_client, admin_client_, url, scope):
    assertNotContains(viewer_client.get(url("audit", scope.pk)), "Export this space’s whole audit log as JSON".encode())
    assertContains(admin_client_.get(url("audit", scope.pk)), "Export this space’s whole audit log as JSON".encode())


def test_it_enforces_csrf_on_the_audit_export(client_for, admin_user, url, light_scope):
    client = client_for(admin_user, enforce_csrf_checks=True)
    assert client.post(url("audit_export", light_scope.pk)).status_code == 403
    assert not AuditEntry.objects.filter(operation="audit_export").exists()


def test_it_shows_a_bot_isolation_scopes_shared_episodes_and_its_profiles_once_each(viewer_client, url, db, system):
    shared = derive_scope("bot-a", "group_100", "bot")
    sibling = derive_scope("bot-a", "group_101", "bot")
    remember(shared, system, "said in group 100")
    remember(sibling, system, "said in group 101")  # same user_key bot:bot-a
    profile(derive_scope("bot-a", "group_100", "session"), name="G100")
    remember(derive_scope("bot-z", "group_100", "bot"), system, "another bot")
    scope = Scope.objects.get(scope_key="bot-a:group_100", isolation="bot")
    response = viewer_client.get(url("audit", scope.pk))
    assert response.status_code == 200
    page = response.content.decode()
    # issue 15: the sibling chat's entries (same user_key) are its own, not this chat's
    assert "said in group 100" in page and "said in group 101" not in page and "another bot" not in page
    assert page.count("<code>profile_update</code>") == 1 and page.count("<code>remember</code>") == 1
