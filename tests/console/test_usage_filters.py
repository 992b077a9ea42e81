"""The Episodes list's Usage filter (issue 18): "never used" and "used in the last N days", where a
use is an injection that put the episode into a prompt, counted in the memory being viewed only.
Kept in the query string across pages and orders, in the count, in bulk by filter, and as htmx."""

from __future__ import annotations

import re
import secrets
from datetime import timedelta

import pytest
from django.utils import timezone

from memconsole.memory import injection, usage
from memconsole.memory.models import Episode, InjectionSnapshot, Scope
from memconsole.memory.scopes import ScopeKeys, derive_scope, register_scope
from tests.factories import plain_episodes

from .conftest import htmx

pytestmark = pytest.mark.django_db


def injected(keys: ScopeKeys, episodes: list[Episode], days_ago: float = 0) -> InjectionSnapshot:
    """An injection snapshot of `keys`' chat that used these episodes `days_ago` days ago, counted
    the way `inject` counts it (`usage.record`)."""
    snapshot = InjectionSnapshot.objects.create(
        snapshot_id=secrets.token_hex(16),
        recorded_at=timezone.now() - timedelta(days=days_ago),
        session_name=keys.session_name,
        scope_key=keys.scope_key,
        user_key=keys.user_key,
        isolation=keys.isolation,
        episode_count=len(episodes),
    )
    usage.record(snapshot, [episode.episode_id for episode in episodes])
    return snapshot


def listed(response, status: int = 200) -> list[str]:
    assert response.status_code == status, response.content.decode()[:2000]
    return re.findall(r'<tr id="episode-([0-9a-f]{12})"', response.content.decode())


def count_text(response) -> str:
    found = re.search(r'<span id="episode-count"[^>]*>(.*?)</span>', response.content.decode(), re.S)
    assert found, "no count on the page"
    return found.group(1).strip()


@pytest.fixture
def used_list(light_scope, keys):
    """Ten episodes of the light scope's memory: one used yesterday, one 20 days ago, the rest never."""
    rows = plain_episodes(keys, 10, start=10)
    injected(keys, [rows[0]], days_ago=1)
    injected(keys, [rows[1]], days_ago=20)
    return rows


def test_it_lists_the_never_used_and_the_recently_used(viewer_client, url, light_scope, used_list):
    never = viewer_client.get(url("episodes", light_scope.pk), {"usage": "never"})
    assert set(listed(never)) == {e.episode_id for e in Episode.objects.all()} - {
        used_list[0].episode_id,
        used_list[1].episode_id,
    }
    assert count_text(never) == "11 of 13 match."
    week = viewer_client.get(url("episodes", light_scope.pk), {"usage": "recent", "used_days": "7"})
    assert listed(week) == [used_list[0].episode_id]
    assert count_text(week) == "1 of 13 match."
    month = viewer_client.get(url("episodes", light_scope.pk), {"usage": "recent", "used_days": "30"})
    assert set(listed(month)) == {used_list[0].episode_id, used_list[1].episode_id}
    page = month.content.decode()
    assert '<option value="recent" selected>Used in the last N days</option>' in page
    assert 'name="used_days" value="30"' in page
    assert "Filters (1 in use)" in page


def test_it_shows_the_default_n_and_lists_everything_until_a_usage_is_chosen(
    viewer_client, url, light_scope, used_list
):
    response = viewer_client.get(url("episodes", light_scope.pk))
    assert len(listed(response)) == 13
    assert 'name="used_days" value="7"' in response.content.decode()  # the N used when "recent" is chosen
    assert count_text(response) == "13 active episodes in this space."
    recent = viewer_client.get(url("episodes", light_scope.pk), {"usage": "recent"})  # no N given: 7 days
    assert listed(recent) == [used_list[0].episode_id]


def test_it_keeps_the_usage_filter_across_pages_and_orders(viewer_client, url, light_scope, keys):
    rows = plain_episodes(keys, 30, start=100)
    injected(keys, rows[:12], days_ago=2)  # used: 12, shown 10 a page
    first = viewer_client.get(
        url("episodes", light_scope.pk), {"usage": "recent", "used_days": "3", "limit": "10", "sort": "stored"}
    )
    assert len(listed(first)) == 10
    assert count_text(first) == "12 of 33 match."
    next_link = re.search(r'<a rel="next" href="([^"]+)"', first.content.decode()).group(1).replace("&amp;", "&")
    assert "usage=recent" in next_link and "used_days=3" in next_link and "sort=stored" in next_link
    second = viewer_client.get(url("episodes", light_scope.pk) + next_link)
    assert "Showing 11–12 of 12." in second.content.decode()
    assert set(listed(first)) | set(listed(second)) == {row.episode_id for row in rows[:12]}
    by_importance = viewer_client.get(url("episodes", light_scope.pk), {"usage": "recent", "sort": "importance"})
    assert set(listed(by_importance)) == {row.episode_id for row in rows[:12]}


def test_it_counts_uses_in_the_memory_being_viewed_only(viewer_client, url, light_scope, used_list, other_keys):
    """An injection in another space naming this space's episode (a stale or crafted id) is not
    a use here: uses are keyed by the injecting space's memory (user_key)."""
    register_scope(other_keys)
    never_used_here = used_list[5]
    injected(other_keys, [never_used_here], days_ago=0)
    week = viewer_client.get(url("episodes", light_scope.pk), {"usage": "recent", "used_days": "7"})
    assert listed(week) == [used_list[0].episode_id]
    never = viewer_client.get(url("episodes", light_scope.pk), {"usage": "never"})
    assert never_used_here.episode_id in listed(never)


def test_under_bot_isolation_a_use_in_any_chat_of_the_shared_memory_counts(viewer_client, url):
    chat_one, chat_two = derive_scope("bot-c", "chat-1", "bot"), derive_scope("bot-c", "chat-2", "bot")
    register_scope(chat_one)
    register_scope(chat_two)
    rows = plain_episodes(chat_one, 3)
    injected(chat_two, [rows[2]])  # the bot's chats share one memory: chat 2's answer used it
    scope = Scope.objects.get(scope_key=chat_one.scope_key, isolation="bot")
    assert listed(viewer_client.get(url("episodes", scope.pk), {"usage": "recent"})) == [rows[2].episode_id]


def test_it_answers_htmx_with_the_list_fragment_only(viewer_client, url, light_scope, used_list):
    response = viewer_client.get(url("episodes", light_scope.pk), {"usage": "never"}, **htmx("episode-list"))
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert html.lstrip().startswith('<div id="episode-list"')
    assert count_text(response) == "11 of 13 match."
    assert used_list[0].episode_id not in listed(response)


@pytest.mark.parametrize("days", ["0", "366", "-1", "abc", "7.5", "9" * 30])
def test_it_refuses_a_bad_number_of_days_with_the_reason(viewer_client, url, light_scope, used_list, days):
    response = viewer_client.get(url("episodes", light_scope.pk), {"usage": "recent", "used_days": days})
    assert listed(response, 400) == []
    html = response.content.decode()
    assert "Enter a whole number of days from 1 to 365." in html
    assert 'id="id_used_days_error"' in html and '<details class="filter-panel wide-open" open>' in html


def test_a_stale_number_of_days_beside_any_usage_is_no_error(viewer_client, url, light_scope, used_list):
    response = viewer_client.get(url("episodes", light_scope.pk), {"usage": "", "used_days": "0"})
    assert len(listed(response)) == 13


def test_an_unknown_usage_is_refused(viewer_client, url, light_scope):
    response = viewer_client.get(url("episodes", light_scope.pk), {"usage": "sometimes"})
    assert listed(response, 400) == []
    assert "Select a valid choice." in response.content.decode()


def test_a_user_without_a_role_gets_403_and_another_bots_user_404(client_for, granted_client, url, light_scope):
    from tests.conftest import _user  # noqa: PLC0415  a user with no console role

    nobody = client_for(_user("nobody", None))
    assert nobody.get(url("episodes", light_scope.pk), {"usage": "never"}).status_code == 403
    assert granted_client.get(url("episodes", light_scope.pk), {"usage": "never"}).status_code == 404


def post_matching(client, url, scope, query: str, **extra):
    data = {"action": "archive", "select": "matching", "filter_query": query, **extra}
    return client.post(url("episodes_bulk", scope.pk), data, **htmx("bulk-result"))


def test_bulk_by_filter_acts_on_the_never_used_only(operator_client, url, light_scope, used_list):
    page = operator_client.get(url("episodes", light_scope.pk), {"usage": "never"}).content.decode()
    assert "Select all 11 that match…" in page
    assert 'name="filter_query" value="usage=never&amp;used_days=7"' not in page  # the query as the user sent it
    assert 'name="filter_query" value="usage=never"' in page
    preview = post_matching(operator_client, url, light_scope, "usage=never").content.decode()
    assert "11 episodes match; 11 will be archived." in preview
    done = post_matching(operator_client, url, light_scope, "usage=never", confirmed="1", expected="11")
    assert "11 episodes archived." in done.content.decode()
    assert set(Episode.objects.filter(status="active").values_list("episode_id", flat=True)) == {
        used_list[0].episode_id,
        used_list[1].episode_id,
    }


def test_bulk_by_filter_with_used_in_the_last_n_days(operator_client, url, light_scope, used_list):
    query = "usage=recent&used_days=30"
    preview = post_matching(operator_client, url, light_scope, query).content.decode()
    assert "2 episodes match; 2 will be archived." in preview
    bad = post_matching(operator_client, url, light_scope, "usage=recent&used_days=0")
    assert bad.status_code == 400
    assert "filters are not valid any more" in bad.content.decode()
    assert Episode.objects.filter(status="archived").count() == 0


def test_a_viewer_may_not_bulk_archive_by_the_usage_filter(viewer_client, url, light_scope, used_list):
    assert post_matching(viewer_client, url, light_scope, "usage=never").status_code == 403
    assert Episode.objects.filter(status="archived").count() == 0


def test_the_count_after_an_inline_archive_keeps_the_usage_filter(operator_client, url, light_scope, used_list):
    back = url("episodes", light_scope.pk, query="usage=never")
    target = used_list[4]
    response = operator_client.post(url("episode_archive", light_scope.pk, target.episode_id), {"next": back}, **htmx())
    assert response.status_code == 200
    assert "10 of 12 match." in response.content.decode()  # one fewer active, still never used


def test_a_real_injection_marks_its_episodes_used_and_looking_does_not(
    viewer_client, url, scope, keys, system, shipped_floor
):
    made = injection.record_injection(keys, system, "Where am I travelling next month?", sender_id="u1")
    used_ids = {episode["episode_id"] for episode in made.context["episodes"]}
    assert used_ids
    some_other = Episode.objects.filter(user_key=keys.user_key, status="active").exclude(episode_id__in=used_ids)
    viewer_client.get(url("episode_detail", scope.pk, some_other.first().episode_id))  # looking is no use
    recent = viewer_client.get(url("episodes", scope.pk), {"usage": "recent", "used_days": "1"})
    assert set(listed(recent)) == used_ids
    never = viewer_client.get(url("episodes", scope.pk), {"usage": "never"})
    assert set(listed(never)) == set(some_other.values_list("episode_id", flat=True))
    # A search keeps the filter too: the trip was injected, so "never used" cannot find it.
    searched = viewer_client.get(url("episodes", scope.pk), {"q": "trip to Beijing", "usage": "never"})
    assert not used_ids & set(listed(searched))
    assert used_ids & set(listed(viewer_client.get(url("episodes", scope.pk), {"q": "trip to Beijing"})))
