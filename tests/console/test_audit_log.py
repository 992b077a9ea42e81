"""The global audit log: every space the user may see (per-bot grants respected), token and user
events, filters (operation in any case, actor, time range, space, target), before/after as a
readable diff, linked targets and spaces, and the chain's state for the page. The space's Audit
tab is the same list filtered to that space."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from memconsole.console.diffs import audit_diff
from memconsole.memory import accounts, health, profiles, tokens
from memconsole.memory.audit import Actor
from memconsole.memory.episodes import remember
from memconsole.memory.models import AuditEntry, BotGrant
from memconsole.memory.roles import ADMIN, VIEWER
from memconsole.memory.scopes import derive_scope

from .conftest import htmx

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(scope, other_scope, keys, system, admin_user):
    """bot-a's space (four episodes, one archived), bot-b's space, a token and a user event."""
    tokens.create_token("support bot", ["bot-a"], system)
    accounts.create_user(admin_user, "carol", "x-Fresh-Account-7", VIEWER)
    profiles.update_profile(keys, system, "session", name="Travel club", add_traits=["friendly"])
    return {"scope": scope, "other": other_scope}


def audit_page(client, query: dict | None = None, **headers) -> str:
    response = client.get("/audit/", query or {}, **headers)
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def test_it_lists_every_spaces_entries_and_the_token_and_user_events(viewer_client, world):
    page = audit_page(viewer_client)
    for operation in ("remember", "archive", "token_create", "user_create", "profile_update"):
        assert f"<code>{operation}</code>" in page, operation
    assert "Bot B remembers the blue door" in page and "Beijing" in page
    assert f'href="/scopes/{world["scope"].pk}/audit/"' in page  # the space column links its Audit tab


def test_it_shows_a_user_limited_to_some_bots_only_their_spaces_entries(granted_client, world):
    page = audit_page(granted_client)
    assert "Bot B remembers the blue door" in page
    assert "Beijing" not in page and "<code>token_create</code>" not in page and "<code>user_create</code>" not in page
    assert "Beijing" not in audit_page(granted_client, {"space": "bot-a"})


def test_a_bot_limited_admin_reads_the_token_and_user_events_they_wrote(client_for, world, admin_user):
    limited = User.objects.create_user("limited-admin", password="x-Fresh-Account-7")
    limited.groups.add(Group.objects.get(name=ADMIN))
    BotGrant.objects.create(user=limited, bot_uuid="bot-b")
    actor = Actor.for_user(limited, frozenset({"bot-b"}))
    tokens.create_token("bot b helper", ["bot-b"], actor)
    accounts.create_user(limited, "dora", "x-Fresh-Account-8", VIEWER, ["bot-b"])

    page = audit_page(client_for(limited))
    assert "bot b helper" in page and "dora" in page  # theirs
    assert "support bot" not in page and "carol" not in page  # another admin's, for all bots


def test_it_keeps_bot_grants_exact_whatever_the_case(client_for, granted_viewer, keys, system):
    remember(derive_scope("BOT-B", "group_1", "session"), system, "shouting bot's memory")
    remember(derive_scope("bot-b", "group_1", "bot"), system, "bot b shared memory")
    page = audit_page(client_for(granted_viewer))
    assert "bot b shared memory" in page and "shouting bot" not in page


def test_it_filters_by_operation_in_any_case_actor_and_target(viewer_client, world, scope_with_episodes):
    page = audit_page(viewer_client, {"operation": "ARCHIVE"})
    assert page.count("<code>archive</code>") == 1 and "<code>remember</code>" not in page
    page = audit_page(viewer_client, {"actor": "ADMIN"})
    assert "<code>user_create</code>" in page and "<code>remember</code>" not in page
    episode_id = scope_with_episodes[3].episode_id
    page = audit_page(viewer_client, {"target": f"episode:{episode_id}"})
    assert page.count("<code>remember</code>") == 1 and page.count("<code>archive</code>") == 1
    assert "Beijing" not in page
    carol = User.objects.get(username="carol")
    page = audit_page(viewer_client, {"target": f"user:{carol.pk}"})
    assert "<code>user_create</code>" in page and "<code>token_create</code>" not in page


def test_it_filters_by_space_and_time_range(viewer_client, world):
    page = audit_page(viewer_client, {"space": "bot-b"})
    assert "Bot B remembers" in page and "Beijing" not in page
    page = audit_page(viewer_client, {"space": "bot-a:group_100"})
    assert "Beijing" in page and "Bot B remembers" not in page
    later = (timezone.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert "No audit entry matches these filters." in audit_page(viewer_client, {"after": later})
    earlier = (timezone.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert "Beijing" in audit_page(viewer_client, {"after": earlier, "before": later})


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ({"after": "2026-02-02T10:00", "before": "2026-02-01T10:00"}, "must come after its start"),
        ({"after": "yesterday"}, "Enter a valid date/time."),
        ({"cursor": "x"}, "This page link is not valid."),
        ({"target": "t" * 301}, "at most 300 characters"),
    ],
)
def test_it_answers_400_to_bad_filters_with_the_reason(viewer_client, world, query, reason):
    response = viewer_client.get("/audit/", query)
    assert response.status_code == 400 and reason in response.content.decode()


def test_it_answers_htmx_with_the_audit_fragment(viewer_client, world):
    html = audit_page(viewer_client, {"operation": "remember"}, **htmx("audit-list"))
    assert html.lstrip().startswith('<div id="audit-list"') and "<html" not in html


def test_it_says_the_audit_export_holds_the_whole_space_when_the_list_is_filtered(admin_client_, url, world):
    # the button under a filtered list read "Export audit as JSON" and gave every entry of the space
    whole = "The export holds every entry of this space, not only those these filters show"
    assert whole not in admin_client_.get(url("audit", world["scope"].pk)).content.decode()
    page = admin_client_.get(url("audit", world["scope"].pk), {"operation": "archive"}).content.decode()
    assert "Export this space’s whole audit log as JSON" in page and whole in page


def test_it_refuses_a_user_without_a_role_and_sends_anonymous_callers_to_the_login(client, client_for, db):
    assert client.get("/audit/")["Location"].startswith("/accounts/login/")
    nobody = User.objects.create_user("nobody", password="x")
    assert client_for(nobody).get("/audit/").status_code == 403


def test_it_shows_before_and_after_as_a_readable_diff(viewer_client, world, keys, system):
    profiles.update_profile(keys, system, "session", add_traits=["patient"])
    page = audit_page(viewer_client, {"operation": "archive"})
    assert '<dl class="audit-diff">' in page and '<span title="status">Status</span>' in page
    assert '<pre class="diff-value diff-old">Active</pre>' in page  # a status by its name in the console
    assert '<pre class="diff-value diff-new">Archived</pre>' in page
    page = audit_page(viewer_client, {"operation": "profile_update"})
    assert '<li class="diff-added">' in page and "patient</li>" in page
    assert "Unchanged:" in page


def test_it_names_the_fields_of_a_diff_in_the_readers_language(viewer_client, world, keys, system):
    profiles.update_profile(keys, system, "session", add_traits=["patient"])
    page = audit_page(viewer_client, {"operation": "archive"}, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert '<span title="status">状态</span>' in page and "<code>status</code>" not in page
    assert '<pre class="diff-value diff-new">已归档</pre>' in page  # the value too, not "archived"
    page = audit_page(viewer_client, {"operation": "profile_update"}, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert '<span title="traits">特征</span>' in page
    unchanged = page.split("未变化：")[1].split("</p>")[0]
    assert '<span title="notes">' in unchanged and "<code>" not in unchanged


def test_it_links_each_target_to_its_screen(admin_client_, world, scope_with_episodes):
    page = audit_page(admin_client_)
    scope = world["scope"]
    episode_id = scope_with_episodes[0].episode_id
    assert f'href="/scopes/{scope.pk}/episodes/{episode_id}/"><code>{episode_id}</code></a>' in page
    assert f'href="/scopes/{scope.pk}/profiles/session/"' in page
    carol = User.objects.get(username="carol")
    assert f'href="/users/{carol.pk}/"' in page and 'href="/tokens/#token-' in page
    assert f"?target=episode%3A{episode_id}" in page  # the filter to that one target


def test_it_shows_the_chain_state_for_the_page_and_a_broken_entry(viewer_client, world):
    assert "The audit chain checks out for the" in audit_page(viewer_client)
    tampered = AuditEntry.objects.filter(operation="archive").get()
    AuditEntry.objects.filter(pk=tampered.pk).update(actor="user:mallory")
    page = audit_page(viewer_client)
    assert f"The audit chain is broken at entry #{tampered.seq}: its fields were changed." in page


def test_it_lists_health_runs_and_links_them(operator_client, world, system):
    health.run_health_check(system)
    page = audit_page(operator_client, {"operation": "health_check"})
    assert "<code>health_check</code>" in page and 'href="/diagnostics/"' in page


def test_it_keeps_the_scope_tab_as_the_same_list_filtered_to_the_space(viewer_client, url, world):
    page = viewer_client.get(url("audit", world["scope"].pk), {"operation": "Remember"}).content.decode()
    assert page.count("<code>remember</code>") == 4 and "Bot B remembers" not in page
    assert "<code>token_create</code>" not in viewer_client.get(url("audit", world["scope"].pk)).content.decode()
    assert 'id="id_space"' not in page and 'class="tabs"' in page


def test_it_404s_another_bots_space_tab(granted_client, url, world):
    assert granted_client.get(url("audit", world["scope"].pk)).status_code == 404


def test_it_diffs_creations_deletions_lists_and_plain_values():
    created = audit_diff(None, {"episode_id": "e1", "content": "hello", "tags": ["a"]})
    assert [(c.field, c.kind, c.after) for c in created.changes] == [
        ("content", "added", "hello"),
        ("episode_id", "added", "e1"),
        ("tags", "added", "a"),
    ]
    deleted = audit_diff({"content": "bye"}, None)
    assert [(c.kind, c.before, c.after) for c in deleted.changes] == [("removed", "bye", None)]
    lists = audit_diff({"traits": ["kind", "busy"], "name": "A"}, {"traits": ["kind", "calm"], "name": "A"})
    (change,) = lists.changes
    assert (change.removed_items, change.added_items, lists.unchanged) == (("busy",), ("calm",), ["name"])
    assert [c.kind for c in audit_diff(1, 2).changes] == ["changed"] and not audit_diff(None, None)
    # an emptied list read "[]" (an emptied name reads blank)
    (emptied,) = audit_diff({"bot_uuids": ["bot-a"]}, {"bot_uuids": []}).changes
    assert (emptied.before, emptied.after, emptied.removed_items) == ("bot-a", "none", ("bot-a",))
