"""What the server renders for the phone layout and for Chinese: labelled table cells (in full
pages and in the row fragments htmx swaps in), the filter panel open only when a filter is in use,
the number of results shown, translated score factors, and sentences joined without a stray space."""

from __future__ import annotations

import re

import pytest
from pytest_django.asserts import assertContains, assertNotContains

from memconsole.memory.episodes import list_episodes
from memconsole.memory.injection import record_injection

from .conftest import htmx

pytestmark = pytest.mark.django_db

CHINESE = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}


def cells_without_label(html: str, row_pattern: str) -> list[str]:
    """The <td> tags, in rows matching row_pattern, that carry no data-label (the actions cell and
    the whole-row status cell need none: their buttons and text say what they are)."""
    return [
        td
        for row in re.findall(row_pattern, html, re.S)
        for td in re.findall(r"<td\b[^>]*>", row)
        if "data-label=" not in td and 'class="actions"' not in td and "colspan" not in td
    ]


def filter_panel(html: str) -> str:
    panel = re.search(r'<details class="filter-panel[^"]*"[^>]*>', html)
    assert panel, "the page has no filter panel"
    return panel.group(0)


def test_it_labels_every_cell_of_the_stacked_tables(admin_client_, url, scope, system, keys):
    record_injection(keys, system, "Where is Alice going?", query_id="q-1", sender_id="u1", sender_name="Alice")
    pages = {
        url("episodes", scope.pk, query="status=all"): r'<tr id="episode-[^"]+" class="episode-row.*?</tr>',
        url("episodes", scope.pk, query="q=trip"): r'<tr id="episode-[^"]+" class="episode-row.*?</tr>',
        url("audit", scope.pk): r'<table class="data audit stack">.*?</table>',
        url("injection", scope.pk): r'<table class="data stack">.*?</table>',
        url("overview"): r'<table class="data stack">.*?</table>',
    }
    for path, rows in pages.items():
        response = admin_client_.get(path)
        assert response.status_code == 200
        html = response.content.decode()
        assert re.search(rows, html, re.S), path
        assert not cells_without_label(html, rows), path


def test_it_labels_the_cells_of_the_row_that_an_archive_swaps_in(operator_client, url, scope, keys):
    episode_id = list_episodes(keys, limit=10).episodes[0].episode_id
    response = operator_client.post(url("episode_archive", scope.pk, episode_id), **htmx())
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    for label in ("Time", "Speaker", "Content", "Tags", "Importance", "Status"):
        assertContains(response, f'data-label="{label}"')
    assert not cells_without_label(html, r"<tr\b.*?</tr>")


@pytest.mark.parametrize(
    ("query", "is_open", "summary"),
    [
        ("", False, "Filters"),
        ("status=active&limit=10", False, "Filters"),  # the default status and a page size filter nothing
        ("q=trip&top_k=3", False, "Filters"),
        ("tag=travel", True, "Filters (1 in use)"),
        ("status=all&sender=u1&importance=3", True, "Filters (3 in use)"),
        ("after=2020-01-01T00:00", True, "Filters (1 in use)"),
        ("importance=abc", True, "Filters (1 in use)"),  # an error inside: shown
        ("importance=9", True, "Filters (1 in use)"),
    ],
)
def test_it_opens_the_filter_panel_only_when_a_filter_is_in_use(viewer_client, url, scope, query, is_open, summary):
    html = viewer_client.get(url("episodes", scope.pk, query=query)).content.decode()  # 200, or 400 for a bad filter
    assert (" open" in filter_panel(html)) is is_open
    assert re.search(rf"<summary>\s*{re.escape(summary)}\s*</summary>", html)


def test_it_keeps_the_filter_panel_in_the_htmx_fragment(viewer_client, url, scope):
    response = viewer_client.get(url("episodes", scope.pk, query="tag=travel"), **htmx())
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html and " open" in filter_panel(html)


@pytest.mark.parametrize(("query", "shown"), [("", "10"), ("q=trip", "10"), ("q=trip&top_k=3", "3"), ("top_k=7", "7")])
def test_it_shows_the_number_of_results_a_search_uses(viewer_client, url, scope, query, shown):
    response = viewer_client.get(url("episodes", scope.pk, query=query))
    assert response.status_code == 200
    html = response.content.decode()
    field = re.search(r'<input[^>]*name="top_k"[^>]*>', html).group(0)
    assert f'value="{shown}"' in field


def test_it_translates_the_score_factors_of_search_results_and_snapshots(viewer_client, url, scope, keys, system):
    record_injection(keys, system, "Where is Alice going?", query_id="q-1", sender_id="u1", sender_name="Alice")
    for path in (url("episodes", scope.pk, query="q=trip+to+Beijing"), url("injection", scope.pk)):
        response = viewer_client.get(path, **CHINESE)
        assert response.status_code == 200
        html = response.content.decode()
        breakdown = re.search(r'<dl class="breakdown".*?</dl>', html, re.S).group(0)
        factors = re.findall(r'data-factor="(\w+)" data-value="([^"]+)"><dt>([^<]+)</dt>', breakdown)
        keys_shown = ["similarity", "lexical", "relevance", "recency", "importance", "speaker", "update", "exact"]
        assert [key for key, _, _ in factors] == keys_shown
        assert [label for _, _, label in factors][3:] == ["时效", "重要性", "发言者", "更新", "精确匹配"], path
        assert all(re.search(r"[\u4e00-\u9fff]", label) for _, _, label in factors), factors  # every factor translated
        assert all(re.fullmatch(r"-?\d+(\.\d+)?(e-?\d+)?", value) for _, value, _ in factors)  # not localized


def test_it_names_who_wrote_an_episode_in_the_language_of_the_request(viewer_client, url, scope, keys):
    episode = list_episodes(keys, limit=10).episodes[0]  # written by a bot over the API: source "agent"
    html = viewer_client.get(url("episode_detail", scope.pk, episode.episode_id), **CHINESE).content.decode()
    source = re.search(r"<dt>来源</dt><dd>([^<]*)</dd>", html)
    assert source and source[1] == "机器人（API）", source


def test_it_joins_chinese_sentences_without_a_space(operator_client, url, scope, other_scope):
    pages = [
        url("episodes", scope.pk),
        url("episodes", scope.pk, query="status=all"),
        url("profiles", other_scope.pk),
        url("profile_detail", other_scope.pk, "session"),
    ]
    for path in pages:
        response = operator_client.get(path, **CHINESE)
        assert response.status_code == 200
        html = response.content.decode()
        assert re.search(r"[\u4e00-\u9fff]", html), path
        assert not re.search(r"[。！？][ \t\r\n]+[^\s<]", html), path
    response = operator_client.get(url("episodes", scope.pk), **CHINESE)
    assertContains(response, "此空间中有 3 条活跃的情景记忆。")


def test_it_shows_profile_limits_in_the_language_of_the_request(operator_client, url, scope):
    response = operator_client.get(url("profile_detail", scope.pk, "session"))
    assertContains(response, "At most 20 traits.")
    response = operator_client.get(url("profile_detail", scope.pk, "session"), **CHINESE)
    assertNotContains(response, "At most")
