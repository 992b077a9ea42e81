"""The Episodes tab: listing, filters, keyset pages, search, row and bulk actions, the detail page."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from memconsole.memory.episodes import delete, list_episodes, remember
from memconsole.memory.models import AuditEntry, Episode, EpisodeCounts
from tests.factories import plain_episodes

from .conftest import htmx

pytestmark = pytest.mark.django_db


def page_text(response, status: int = 200) -> str:
    """The page's text, after checking its status as assertContains does."""
    assert response.status_code == status, response.status_code
    return response.content.decode()


# --- listing ------------------------------------------------------------------------------------


def test_it_lists_the_active_episodes_newest_first_by_default(viewer_client, url, scope):
    page = page_text(viewer_client.get(url("episodes", scope.pk)))
    assert page.index("我喜欢喝绿茶") < page.index("My favourite food is dumplings") < page.index("trip to Beijing")
    assert "The team meeting moved to Thursday" not in page  # archived
    assert "3 active episodes in this space." in page
    assert '<span class="pill pill-active">Active</span>' in page


@pytest.mark.parametrize(
    ("status", "shown", "hidden"),
    [
        ("archived", "The team meeting moved", "trip to Beijing"),
        ("all", "The team meeting moved", None),
        ("superseded", None, "trip to Beijing"),
    ],
)
def test_it_filters_by_status(viewer_client, url, scope, status, shown, hidden):
    page = page_text(viewer_client.get(url("episodes", scope.pk), {"status": status}))
    if shown:
        assert shown in page
    if hidden:
        assert hidden not in page
    if status == "archived":
        assert '<span class="pill pill-archived">Archived</span>' in page


def test_it_filters_by_speaker_tag_importance_and_time(viewer_client, url, scope, keys):
    episodes_url = url("episodes", scope.pk)
    page = page_text(viewer_client.get(episodes_url, {"sender": "u1", "status": "all"}))
    assert "trip to Beijing" in page and "team meeting" in page and "dumplings" not in page
    page = page_text(viewer_client.get(episodes_url, {"tag": "food"}))
    assert "dumplings" in page and "Beijing" not in page
    page = page_text(viewer_client.get(episodes_url, {"importance": "3"}))
    assert "dumplings" in page and "Beijing" not in page
    Episode.objects.filter(sender_id="u1").update(timestamp=timezone.now() - timedelta(days=10))
    since = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    page = page_text(viewer_client.get(episodes_url, {"after": since}))
    assert "dumplings" in page and "Beijing" not in page
    page = page_text(viewer_client.get(episodes_url, {"before": since}))
    assert "Beijing" in page and "dumplings" not in page


def test_it_shows_an_empty_state_that_says_what_to_do(viewer_client, url, scope):
    page = page_text(viewer_client.get(url("episodes", scope.pk), {"tag": "nothing"}))
    assert "No episode matches these filters" in page
    page = page_text(viewer_client.get(url("episodes", scope.pk), {"status": "superseded"}))
    assert "No episode matches these filters" in page


@pytest.mark.parametrize("size", [10, 25, 50])
def test_it_pages_with_next_and_previous_links_at_each_page_size(viewer_client, url, light_scope, keys, size):
    scope = light_scope
    rows = plain_episodes(keys, 60)
    episodes_url = url("episodes", scope.pk)
    first = page_text(viewer_client.get(episodes_url, {"limit": size, "tag": "bulk"}))
    assert first.count('class="episode-row') == size
    assert rows[-1].episode_id in first and 'rel="prev"' not in first
    cursor = re.search(r'<a rel="next" href="\?[^"]*cursor=(a[0-9n.-]+)', first).group(1)
    second = page_text(viewer_client.get(episodes_url, {"limit": size, "tag": "bulk", "cursor": cursor}))
    assert rows[-1 - size].episode_id in second and rows[-1].episode_id not in second
    previous = re.search(r'<a rel="prev" href="\?[^"]*cursor=(b[0-9n.-]+)', second).group(1)
    back = page_text(viewer_client.get(episodes_url, {"limit": size, "tag": "bulk", "cursor": previous}))
    assert back.count('class="episode-row') == size and rows[-1].episode_id in back


def test_it_keeps_the_filters_in_the_page_links(viewer_client, url, light_scope, keys):
    scope = light_scope
    plain_episodes(keys, 15)
    page = page_text(viewer_client.get(url("episodes", scope.pk), {"limit": 10, "tag": "bulk", "status": "all"}))
    link = re.search(r'<a rel="next" href="([^"]+)"', page).group(1)
    assert "tag=bulk" in link and "status=all" in link and "limit=10" in link


def test_it_fills_the_speaker_picker_with_this_scopes_speakers_only(
    viewer_client, granted_client, url, scope, other_scope
):
    page = page_text(viewer_client.get(url("episodes", scope.pk)))
    picker = re.search(r'<datalist id="speaker-list"[^>]*>', page).group(0)
    options_url = url("speaker_options", scope.pk)
    assert f'hx-get="{options_url}"' in picker and 'hx-trigger="focusin from:#id_sender once"' in picker
    assert 'hx-push-url="false"' in picker and 'hx-target="this"' in picker
    options = page_text(viewer_client.get(options_url, **htmx()))
    assert '<option value="u1">Alice (u1)</option>' in options and '<option value="u2">Bob (u2)</option>' in options
    assert "u9" not in options and "Zed" not in options  # bot B's speaker
    assert granted_client.get(options_url).status_code == 404  # may see only bot B


def test_it_shows_each_query_its_own_filter_values(viewer_client, url, light_scope):
    """The filter form is cached by scope, language and query: a different query, an invalid one
    or another language never gets another query's form."""
    episodes_url = url("episodes", light_scope.pk)
    for tag in ("alpha", "beta", "alpha"):
        page = page_text(viewer_client.get(episodes_url, {"tag": tag}))
        assert re.search(rf'name="tag" value="{tag}"', page) and "Filters (1 in use)" in page
    page = page_text(viewer_client.get(episodes_url, {"tag": "alpha", "cursor": "a999999.999999"}))
    assert 'name="tag" value="alpha"' in page
    bad = viewer_client.get(episodes_url, {"tag": "alpha", "importance": "9"})
    assert bad.status_code == 400 and 'class="field-error"' in page_text(bad, 400)
    page = page_text(viewer_client.get(episodes_url, {"tag": "alpha"}))
    assert 'class="field-error"' not in page and 'name="importance" value="9"' not in page
    viewer_client.post("/i18n/setlang/", {"language": "es", "next": episodes_url})
    page = page_text(viewer_client.get(episodes_url, {"tag": "alpha"}))
    assert 'name="tag" value="alpha"' in page and "Filtros (1 en uso)" in page


def test_it_never_shows_one_readers_time_zone_in_anothers_cached_filters(client_for, url, light_scope, viewer):
    episodes_url = url("episodes", light_scope.pk)
    far_east, utc = client_for(viewer), client_for(viewer)
    far_east.cookies["memconsole_browser_tz"] = "Pacific%2FKiritimati"
    assert "From (Pacific/Kiritimati)" in page_text(far_east.get(episodes_url, {"tag": "cachetest"}))
    page = page_text(utc.get(episodes_url, {"tag": "cachetest"}))
    assert "From (UTC)" in page and "Kiritimati" not in page


def test_it_labels_the_controls_with_the_agreed_names(operator_client, admin_client_, url, scope, keys):
    plain_episodes(keys, 30)
    page = page_text(admin_client_.get(url("episodes", scope.pk), {"limit": 10}))
    assert '<label for="id_q">Search episodes</label>' in page
    assert '<label for="id_status">Status</label>' in page
    assert '<button type="submit">Search</button>' in page
    for name in ("Archive", "Delete…"):
        assert f">{name}</button>" in page
    assert ">Next</a>" in page
    page = page_text(admin_client_.get(url("episodes", scope.pk), {"status": "archived"}))
    assert ">Restore</button>" in page
    second = re.search(
        r'<a rel="next" href="\?([^"]+)"', page_text(admin_client_.get(url("episodes", scope.pk), {"limit": 10}))
    )
    assert ">Previous</a>" in page_text(
        admin_client_.get(url("episodes", scope.pk) + "?" + second.group(1).replace("&amp;", "&"))
    )


def test_it_hides_actions_a_role_cannot_use(viewer_client, operator_client, url, scope):
    page = page_text(viewer_client.get(url("episodes", scope.pk)))
    assert ">Archive</button>" not in page and ">Delete</button>" not in page and "read only" in page
    page = page_text(operator_client.get(url("episodes", scope.pk)))
    assert ">Archive</button>" in page and ">Delete</button>" not in page


@pytest.mark.parametrize("client_name", ["viewer_client", "admin_client_"])
def test_it_shows_html_in_episode_content_as_text(request, client_name, url, scope, keys, system):
    client = request.getfixturevalue(client_name)
    remember(
        keys,
        system,
        '<script>alert("x")</script><img src=x onerror=alert(1)>',
        sender_name="<b>Mallory</b>",
        sender_id='u"><i>',
        tags=["<em>tag</em>"],
    )
    for query in ({}, {"q": "alert"}):  # the list and the search results
        page = page_text(client.get(url("episodes", scope.pk), query))
        assert "<script>alert" not in page and "<img src=x" not in page and "<b>Mallory</b>" not in page
        assert "<em>tag" not in page and 'u"><i>' not in page
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page and "&lt;b&gt;Mallory&lt;/b&gt;" in page
        assert "&lt;em&gt;tag&lt;/em&gt;" in page and "(u&quot;&gt;&lt;i&gt;)" in page


def test_it_renders_times_as_utc_time_elements(viewer_client, url, scope):
    page = page_text(viewer_client.get(url("episodes", scope.pk)))
    assert re.search(
        r'<time datetime="\d{4}-\d\d-\d\dT[\d:.]+\+00:00" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">', page
    )


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"cursor": "x1"}, None),
        ({"cursor": "a"}, None),
        ({"status": "deleted"}, "status"),
        ({"importance": "9"}, "importance"),
        ({"importance": "two"}, "importance"),
        ({"after": "yesterday"}, "after"),
        ({"before": "2024-13-45"}, "before"),
        ({"after": "2024-02-02", "before": "2024-01-01"}, "before"),
        ({"limit": "7"}, "limit"),
        ({"limit": "1000000"}, "limit"),
        ({"tag": "a,b"}, "tag"),
        ({"q": "x" * 301}, "q"),
        ({"q": "trip", "top_k": "0"}, "top_k"),
        ({"q": "trip", "top_k": "51"}, "top_k"),
        ({"sender": "s" * 300}, "sender"),
    ],
)
def test_it_answers_400_with_an_inline_error_to_bad_input(viewer_client, url, light_scope, query, field):
    response = viewer_client.get(url("episodes", light_scope.pk), query)
    assert response.status_code == 400
    page = page_text(response, 400)
    assert 'class="form-errors" role="alert"' in page
    if field:
        assert f'id="id_{field}_error"' in page


def test_the_longest_search_the_box_takes_fits_in_a_request_line(viewer_client, url, light_scope):
    """A search travels in the URL: the longest the box accepts, in Chinese (9 bytes a character once
    percent-encoded), with every filter set, stays within gunicorn's 4,094-byte request line (it was
    refused with a bare 414 past ~450 characters while the box allowed 2,000)."""
    page = viewer_client.get(url("episodes", light_scope.pk)).content.decode()
    longest = int(re.search(r'name="q"[^>]*maxlength="(\d+)"', page)[1])
    query = {"q": "旅" * longest, "status": "archived", "sender": "s" * 64, "tag": "travel", "importance": "3"}
    query |= {"after": "2024-01-01T00:00", "before": "2024-12-31T23:59", "sort": "importance", "top_k": "50"}
    request_line = f"GET {url('episodes', light_scope.pk)}?{urlencode(query)} HTTP/1.1"
    assert len(request_line.encode()) <= 4094 - 200  # room for a cursor and the usage filter
    assert viewer_client.get(url("episodes", light_scope.pk), {"q": "旅" * longest}).status_code == 200


def test_it_answers_htmx_with_the_list_fragment_even_for_bad_input(viewer_client, url, scope):
    response = viewer_client.get(url("episodes", scope.pk), {"status": "all"}, **htmx("episode-list"))
    assert response.status_code == 200
    assert page_text(response).lstrip().startswith('<div id="episode-list"') and b"<html" not in response.content
    response = viewer_client.get(url("episodes", scope.pk), {"importance": "9"}, **htmx("episode-list"))
    assert response.status_code == 400 and b"<html" not in response.content and b"form-errors" in response.content


def test_it_answers_the_scope_counter_with_the_counts_alone(viewer_client, url, scope):
    response = viewer_client.get(url("episodes", scope.pk), **htmx("scope-counts"))
    assert page_text(response).strip() == "3 active, 1 archived, 0 superseded"


def test_it_renders_pages_without_counting_or_offsets_and_with_bounded_queries(viewer_client, url, light_scope, keys):
    scope = light_scope
    plain_episodes(keys, 120)
    episodes_url = url("episodes", scope.pk)
    with CaptureQueriesContext(connection) as first:
        page = page_text(viewer_client.get(episodes_url, {"limit": 50}))
    cursor = re.search(r"cursor=(a[0-9n.-]+)", page).group(1)
    with CaptureQueriesContext(connection) as deeper:
        assert viewer_client.get(episodes_url, {"limit": 50, "cursor": cursor, "status": "all"}).status_code == 200
    for captured in (first, deeper):
        sql = " ".join(q["sql"].upper() for q in captured.captured_queries)
        assert "COUNT(" not in sql and "OFFSET" not in sql
        memory = [q for q in captured.captured_queries if "memory_" in q["sql"]]
        assert len(memory) <= 7, [q["sql"][:120] for q in memory]


# --- search -------------------------------------------------------------------------------------


def test_it_searches_semantically_and_shows_score_and_breakdown(viewer_client, url, scope):
    page = page_text(viewer_client.get(url("episodes", scope.pk), {"q": "travelling to China", "top_k": "2"}))
    assert "2 results for this search." in page
    # Found by a console user: "Most important first" stayed selected while results came by relevance.
    assert "Most relevant first: Order and Per page apply to the list without a search." in page
    assert page.index("trip to Beijing") < page.index("</tbody>")
    assert re.search(r"<strong>Score \d\.\d{3}</strong>", page)
    for part in ("similarity", "recency", "importance", "speaker", "update", "exact"):
        assert f"<dt>{part}</dt>" in page


def test_it_searches_with_the_same_filters(viewer_client, url, scope):
    page = page_text(viewer_client.get(url("episodes", scope.pk), {"q": "meeting", "status": "archived"}))
    assert "team meeting moved to Thursday" in page and "dumplings" not in page
    page = page_text(viewer_client.get(url("episodes", scope.pk), {"q": "food", "sender": "u1"}))
    assert "dumplings" not in page
    page = page_text(viewer_client.get(url("episodes", scope.pk), {"q": "anything", "tag": "drink"}))
    assert "绿茶" in page and "Beijing" not in page


def test_it_says_so_when_a_search_finds_nothing(viewer_client, url, scope):
    page = page_text(viewer_client.get(url("episodes", scope.pk), {"q": "dumplings", "tag": "nope"}))
    assert "No episode matches this search" in page


# --- row actions --------------------------------------------------------------------------------


def test_it_archives_a_row_in_place_for_htmx_and_audits_it(operator_client, url, scope, keys, scope_with_episodes):
    episode = scope_with_episodes[0]
    response = operator_client.post(
        url("episode_archive", scope.pk, episode.episode_id), {"next": url("episodes", scope.pk)}, **htmx()
    )
    html = page_text(response)
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<tr id="episode-{episode.episode_id}"') and "<html" not in html
    assert '<span class="pill pill-archived">Archived</span>' in html and ">Restore</button>" in html
    # The counts come out of band in the same response (no second request), and the row offers an Undo.
    assert re.search(
        r'<span id="scope-counts" hx-swap-oob="innerHTML">\s*2 active, 2 archived, 0 superseded\s*</span>', html
    )
    assert 'class="link undo"' in html
    entry = AuditEntry.objects.filter(operation="archive").latest("id")
    assert (entry.target_id, entry.actor, entry.payload["after"]) == (
        episode.episode_id,
        "user:operator",
        {"status": "archived"},
    )
    assert EpisodeCounts.objects.get(user_key=keys.user_key).archived == 2


def test_it_restores_a_row_and_redirects_without_javascript(operator_client, url, scope, scope_with_episodes):
    archived = scope_with_episodes[3]
    back = url("episodes", scope.pk, query="status=archived")
    response = operator_client.post(url("episode_restore", scope.pk, archived.episode_id), {"next": back})
    assert response.status_code == 302 and response["Location"] == back
    archived.refresh_from_db()
    assert archived.status == "active"
    assert AuditEntry.objects.filter(operation="restore", target_id=archived.episode_id).exists()
    assert "is active again" in page_text(operator_client.get(back))


def test_an_action_that_changes_nothing_says_so_and_offers_no_undo(operator_client, url, scope, scope_with_episodes):
    # restoring an episode already active said "is active again" (and archiving twice, "is archived")
    active, archived = scope_with_episodes[0], scope_with_episodes[3]
    entries = AuditEntry.objects.count()
    page = page_text(operator_client.post(url("episode_restore", scope.pk, active.episode_id), **htmx()))
    assert f"Nothing changed: episode {active.episode_id} was already active." in page and "Undo" not in page
    page = page_text(operator_client.post(url("episode_archive", scope.pk, archived.episode_id), **htmx()))
    assert f"Nothing changed: episode {archived.episode_id} was already archived." in page and "Undo" not in page
    assert AuditEntry.objects.count() == entries


def test_reassigning_to_the_speaker_it_already_has_says_nothing_changed(
    operator_client, url, scope, scope_with_episodes
):
    episode = next(e for e in scope_with_episodes if e.sender_id == "u1")
    form = {"speaker": "u1", "version": str(episode.version)}
    response = operator_client.post(url("episode_reassign", scope.pk, episode.episode_id), form, follow=True)
    assert f"Nothing changed: episode {episode.episode_id} was already about" in page_text(response)


def test_it_never_redirects_to_another_site(operator_client, url, scope, scope_with_episodes):
    response = operator_client.post(
        url("episode_archive", scope.pk, scope_with_episodes[0].episode_id), {"next": "https://evil.example/"}
    )
    assert response["Location"] == url("episodes", scope.pk)


@pytest.mark.parametrize("back", ["abc", "episodes", "console:overview", "../x"])
def test_a_next_that_is_not_a_path_of_this_site_goes_to_the_list(
    operator_client, url, scope, scope_with_episodes, back
):
    """Found by a user: a bare word as `next` was taken as a view name, and the archive, already
    made, answered 500 (NoReverseMatch)."""
    episode = scope_with_episodes[0]
    response = operator_client.post(url("episode_archive", scope.pk, episode.episode_id), {"next": back})
    assert response.status_code == 302 and response["Location"] == url("episodes", scope.pk)
    episode.refresh_from_db()
    assert episode.status == "archived"


def test_the_time_zone_form_with_a_bare_word_as_next_goes_to_the_overview(operator_client):
    response = operator_client.post(reverse("console:time_zone"), {"zone": "Asia/Kolkata", "next": "abc"})
    assert response.status_code == 302 and response["Location"] == reverse("console:overview")


def test_it_asks_for_confirmation_before_deleting_without_javascript(admin_client_, url, scope, scope_with_episodes):
    episode = scope_with_episodes[0]
    response = admin_client_.post(url("episode_delete", scope.pk, episode.episode_id))
    assert response.status_code == 200
    page = page_text(response)
    assert "Delete episode" in page and 'name="confirmed" value="1"' in page
    assert Episode.objects.filter(pk=episode.pk).exists()
    response = admin_client_.post(url("episode_delete", scope.pk, episode.episode_id), {"confirmed": "1"})
    assert response.status_code == 302 and not Episode.objects.filter(pk=episode.pk).exists()


def test_it_deletes_a_row_in_place_for_htmx_and_audits_it(admin_client_, url, scope, keys, scope_with_episodes):
    episode = scope_with_episodes[1]
    response = admin_client_.post(url("episode_delete", scope.pk, episode.episode_id), {"confirmed": "1"}, **htmx())
    html = page_text(response)
    assert html.lstrip().startswith(f'<tr id="episode-{episode.episode_id}" class="episode-row deleted">')
    assert "was deleted" in html and re.search(r'<span id="scope-counts" hx-swap-oob="innerHTML">\s*2 active', html)
    entry = AuditEntry.objects.get(operation="delete", target_id=episode.episode_id)
    assert entry.payload["before"]["content"] == "My favourite food is dumplings"
    assert EpisodeCounts.objects.get(user_key=keys.user_key).active == 2


def test_it_carries_the_confirmation_on_the_delete_button(admin_client_, url, scope, scope_with_episodes):
    episode = scope_with_episodes[0]
    page = page_text(admin_client_.get(url("episodes", scope.pk)))
    delete_url = url("episode_delete", scope.pk, episode.episode_id)
    button = re.search(rf'<button [^>]*formaction="{delete_url}"[^>]*>', page).group(0)
    assert f'hx-post="{delete_url}"' in button and 'hx-target="closest tr"' in button
    assert 'hx-vals=\'{"confirmed": "1"}\'' in button
    assert (
        f'hx-confirm="Delete episode {episode.episode_id}? The episode and its search vector are removed. The audit log keeps a copy of its content (its before-image) unless the person is erased."'
        in button
    )
    assert 'form="row-actions"' in button and 'type="submit"' in button


def test_it_gives_the_rows_one_form_with_the_pages_csrf_token(admin_client_, url, scope, scope_with_episodes):
    """Every row button submits the page's one row-actions form; without JavaScript that form
    carries the CSRF token and the page to come back to, and the button's formaction the episode."""
    page = page_text(admin_client_.get(url("episodes", scope.pk), {"tag": "food"}))
    form = re.search(r'<form id="row-actions" method="post" hidden>(.*?)</form>', page, re.S).group(1)
    assert 'name="csrfmiddlewaretoken"' in form and 'name="next" value="/scopes/' in form and "tag=food" in form
    assert page.count('form="row-actions"') == 2  # archive and delete of the one row shown
    assert page.count("<form") == page.count("</form>") and page.count('id="row-actions"') == 1


def test_it_answers_404_to_an_action_on_a_deleted_episode(admin_client_, url, scope, keys, system, scope_with_episodes):
    episode = scope_with_episodes[0]
    delete(keys, system, [episode.episode_id])
    assert admin_client_.post(url("episode_archive", scope.pk, episode.episode_id), **htmx()).status_code == 404
    assert admin_client_.get(url("episode_detail", scope.pk, episode.episode_id)).status_code == 404


def test_it_answers_404_to_a_malformed_episode_id(viewer_client, url, scope):
    assert viewer_client.get(f"/scopes/{scope.pk}/episodes/NOT-AN-ID/").status_code == 404


def test_it_enforces_csrf_on_row_actions(client_for, operator, url, scope, scope_with_episodes):
    client = client_for(operator, enforce_csrf_checks=True)
    episode = scope_with_episodes[0]
    assert client.post(url("episode_archive", scope.pk, episode.episode_id)).status_code == 403
    episode.refresh_from_db()
    assert episode.status == "active"
    response = client.get(url("episodes", scope.pk))
    assert response.status_code == 200
    page = response.content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert (
        client.post(url("episode_archive", scope.pk, episode.episode_id), {"csrfmiddlewaretoken": token}).status_code
        == 302
    )
    episode.refresh_from_db()
    assert episode.status == "archived"


# --- bulk ---------------------------------------------------------------------------------------


def test_it_previews_a_bulk_action_with_its_count_before_acting(operator_client, url, scope, scope_with_episodes):
    ids = [e.episode_id for e in scope_with_episodes]
    response = operator_client.post(
        url("episodes_bulk", scope.pk), {"action": "archive", "episode_ids": ids}, **htmx("bulk-result")
    )
    html = page_text(response)
    assert response.status_code == 200 and "<html" not in html
    assert "You selected 4 episodes; 3 will be archived." in html
    assert Episode.objects.filter(status="archived").count() == 1
    response = operator_client.post(
        url("episodes_bulk", scope.pk),
        {"action": "archive", "episode_ids": ids, "confirmed": "1"},
        **htmx("bulk-result"),
    )
    assert "3 episodes archived." in page_text(response) and "episodesChanged" in json.loads(response["HX-Trigger"])
    assert Episode.objects.filter(status="archived").count() == 4
    assert AuditEntry.objects.filter(operation="archive").count() == 4  # one from the fixture


def test_it_runs_bulk_actions_without_javascript(admin_client_, url, scope, scope_with_episodes):
    ids = [e.episode_id for e in scope_with_episodes[:2]]
    preview = admin_client_.post(url("episodes_bulk", scope.pk), {"action": "delete", "episode_ids": ids})
    assert (
        preview.status_code == 200 and b"<html" in preview.content and b"2 will be deleted for good" in preview.content
    )
    done = admin_client_.post(
        url("episodes_bulk", scope.pk), {"action": "delete", "episode_ids": ids, "confirmed": "1"}
    )
    assert done.status_code == 302
    assert not Episode.objects.filter(episode_id__in=ids).exists()


def test_it_refuses_a_bulk_delete_to_an_operator(operator_client, url, scope, scope_with_episodes):
    ids = [scope_with_episodes[0].episode_id]
    response = operator_client.post(
        url("episodes_bulk", scope.pk), {"action": "delete", "episode_ids": ids, "confirmed": "1"}
    )
    assert response.status_code == 403
    assert Episode.objects.filter(episode_id__in=ids).exists()


def test_it_refuses_a_bulk_action_to_a_viewer(viewer_client, url, scope, scope_with_episodes):
    ids = [scope_with_episodes[0].episode_id]
    assert (
        viewer_client.post(url("episodes_bulk", scope.pk), {"action": "archive", "episode_ids": ids}).status_code == 403
    )


@pytest.mark.parametrize(
    "data",
    [
        {"action": "archive"},
        {"action": "archive", "episode_ids": ["nothex"]},
        {"action": "explode", "episode_ids": ["0123456789ab"]},
        {"action": "archive", "episode_ids": [f"{i:012x}" for i in range(201)]},
    ],
)
def test_it_answers_400_to_a_bad_bulk_request(admin_client_, url, light_scope, data):
    response = admin_client_.post(url("episodes_bulk", light_scope.pk), data, **htmx("bulk-result"))
    assert response.status_code == 400 and b'class="form-errors"' in response.content


def test_it_ignores_other_scopes_episodes_in_a_bulk_request(admin_client_, url, scope, other_scope, other_keys):
    foreign = list_episodes(other_keys).episodes[0]
    response = admin_client_.post(
        url("episodes_bulk", scope.pk), {"action": "delete", "episode_ids": [foreign.episode_id], "confirmed": "1"}
    )
    assert response.status_code == 200 and b"None of the selected episodes exists" in response.content
    assert Episode.objects.filter(pk=foreign.pk).exists()


def test_it_enforces_csrf_on_bulk_actions(client_for, admin_user, url, scope, scope_with_episodes):
    client = client_for(admin_user, enforce_csrf_checks=True)
    ids = [scope_with_episodes[0].episode_id]
    response = client.post(url("episodes_bulk", scope.pk), {"action": "delete", "episode_ids": ids, "confirmed": "1"})
    assert response.status_code == 403 and Episode.objects.filter(episode_id__in=ids).exists()


# --- detail -------------------------------------------------------------------------------------


def test_it_shows_an_episode_with_its_supersede_chain_and_audit_history(viewer_client, url, scope, keys, system):
    old = remember(keys, system, "Alice lives in Paris", sender_id="u1").episode
    new = remember(keys, system, "Alice lives in Paris", tags=["correction"], sender_id="u1")
    assert new.superseded == [old.episode_id]
    page = page_text(viewer_client.get(url("episode_detail", scope.pk, old.episode_id)))
    assert "Replaced by" in page and new.episode.episode_id in page
    assert '<span class="pill pill-superseded">Superseded</span>' in page
    assert "<code>remember</code>" in page
    page = page_text(viewer_client.get(url("episode_detail", scope.pk, new.episode.episode_id)))
    assert "Replaces" in page and old.episode_id in page


def test_it_shows_an_episode_without_a_chain_and_its_audit_entries(viewer_client, url, scope, scope_with_episodes):
    archived = scope_with_episodes[3]
    page = page_text(viewer_client.get(url("episode_detail", scope.pk, archived.episode_id)))
    assert "neither replaces nor is replaced" in page
    assert "<code>archive</code>" in page and "<code>remember</code>" in page
    assert "The team meeting moved to Thursday" in page


@pytest.mark.parametrize(
    "query",
    [
        {"after": "9999-12-31T23:00:00-05:00"},
        {"before": "0001-01-01T00:10:00+01:00"},
        {"q": "trip", "after": "9999-12-31T23:00:00-05:00"},
        {"q": "trip", "before": "0001-01-01T00:10:00+01:00"},
    ],
)
def test_it_answers_400_to_a_time_filter_with_no_utc_time(viewer_client, url, light_scope, query):
    response = viewer_client.get(url("episodes", light_scope.pk), query)
    assert response.status_code == 400
    assert 'class="form-errors" role="alert"' in page_text(response, 400)
