"""The Episodes tab's order and counts (issue 17): sorted by the event time the Time column shows,
by importance or by when stored; the filtered count, the position, first and last page links;
counts that update out of band after inline actions."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memconsole.memory import queries
from memconsole.memory.models import Episode
from tests.factories import plain_episodes

from .conftest import htmx

pytestmark = pytest.mark.django_db

ROW_ID = re.compile(r'<tr id="episode-([0-9a-f]{12})"')


def page_text(response, status: int = 200) -> str:
    assert response.status_code == status, response.status_code
    return response.content.decode()


def row_ids(page: str) -> list[str]:
    return ROW_ID.findall(page)


def link(page: str, rel: str) -> str:
    found = re.search(rf'<a rel="{rel}" href="\?([^"]+)"', page)
    assert found, f"no {rel} link"
    return found.group(1).replace("&amp;", "&")


@pytest.fixture
def shuffled(light_scope, keys):
    """Six episodes stored in an order other than their event times (as imports and late
    deliveries do): stored 0..5, event times 12, 13, 16, 14, 15, none (Nov 12, 13, 16, 14...)."""
    base = timezone.now() - timedelta(days=30)
    days = [12, 13, 16, 14, 15, None]
    return plain_episodes(
        keys,
        6,
        timestamp=lambda n: None if days[n] is None else base + timedelta(days=days[n]),
        importance=lambda n: [3, 1, 5, 2, 4, 3][n],
        start=0,
    )


def test_newest_first_is_by_the_event_time_the_time_column_shows(viewer_client, url, light_scope, shuffled):
    page = page_text(viewer_client.get(url("episodes", light_scope.pk), {"tag": "bulk"}))
    ids = [e.episode_id for e in shuffled]
    # Times 16, 15, 14, 13, 12, then the one without a time; the fixture's three plain rows are newer.
    assert row_ids(page)[3:] == [ids[2], ids[4], ids[3], ids[1], ids[0], ids[5]]
    assert "Newest first, by event time." in page


def test_it_sorts_by_importance_and_by_when_stored(viewer_client, url, light_scope, shuffled):
    ids = [e.episode_id for e in shuffled]
    page = page_text(viewer_client.get(url("episodes", light_scope.pk), {"tag": "bulk", "sort": "importance"}))
    ours = [i for i in row_ids(page) if i in ids]
    assert ours == [ids[2], ids[4], ids[5], ids[0], ids[3], ids[1]]  # 5, 4, 3 (newer id first), 3, 2, 1
    assert "Most important first." in page
    page = page_text(viewer_client.get(url("episodes", light_scope.pk), {"tag": "bulk", "sort": "stored"}))
    assert [i for i in row_ids(page) if i in ids] == list(reversed(ids))
    assert "Last stored first." in page


def test_it_refuses_an_unknown_order_with_the_reason(viewer_client, url, light_scope):
    response = viewer_client.get(url("episodes", light_scope.pk), {"sort": "random"})
    assert response.status_code == 400 and 'class="field-error"' in response.content.decode()


@pytest.mark.parametrize("sort", ["time", "importance", "stored"])
def test_every_order_pages_forward_back_and_to_the_last_page_with_positions(
    viewer_client, url, light_scope, keys, sort
):
    now = timezone.now()
    plain_episodes(
        keys,
        47,
        timestamp=lambda n: None if n % 9 == 0 else now - timedelta(minutes=(n * 37) % 50),
        importance=lambda n: 1 + n % 5,
    )
    episodes_url = url("episodes", light_scope.pk)
    query = {"limit": 10, "sort": sort, "status": "all"}
    seen: list[str] = []
    page = page_text(viewer_client.get(episodes_url, query))
    assert "50 episodes in this space." in page and "Showing 1–10 of 50." in page
    assert 'rel="prev"' not in page and ">First page</a>" not in page
    for number in range(5):
        seen += row_ids(page)
        if number < 4:
            page = page_text(viewer_client.get(f"{episodes_url}?{link(page, 'next')}"))
            assert f"Showing {10 * number + 11}–{10 * number + 20} of 50." in page
    assert len(seen) == len(set(seen)) == 50 and 'rel="next"' not in page
    # The list agrees with the domain's order, all the way down.
    expected = [e.episode_id for e in _ordered(keys, sort)]
    assert seen == expected
    back = page_text(viewer_client.get(f"{episodes_url}?{link(page, 'prev')}"))
    assert row_ids(back) == seen[30:40] and "Showing 31–40 of 50." in back
    first = page_text(viewer_client.get(episodes_url, query))
    last = page_text(viewer_client.get(f"{episodes_url}?{link(first, 'last')}"))
    assert row_ids(last) == seen[40:] and "Showing 41–50 of 50." in last and ">First page</a>" in last
    assert 'rel="next"' not in last and 'rel="last"' not in last
    before_last = page_text(viewer_client.get(f"{episodes_url}?{link(last, 'prev')}"))
    assert row_ids(before_last) == seen[30:40] and "Showing 31–40 of 50." in before_last


def _ordered(keys, sort):
    rows = list(Episode.objects.in_scope(keys.user_key))
    if sort == "time":
        with_time = sorted((e for e in rows if e.timestamp), key=lambda e: (e.timestamp, e.pk), reverse=True)
        return with_time + sorted((e for e in rows if not e.timestamp), key=lambda e: e.pk, reverse=True)
    if sort == "importance":
        return sorted(rows, key=lambda e: (e.importance, e.pk), reverse=True)
    return sorted(rows, key=lambda e: e.pk, reverse=True)


def test_it_shows_the_filtered_count_of_the_total(viewer_client, url, light_scope, keys):
    plain_episodes(keys, 20, importance=lambda n: 5 if n < 9 else 1)
    page = page_text(viewer_client.get(url("episodes", light_scope.pk), {"importance": "5"}))
    assert "9 of 23 match." in page and "Showing 1–9 of 9." in page
    assert "that match…" not in page  # a viewer has no bulk bar


def test_it_says_when_a_count_stopped_counting(viewer_client, url, light_scope, keys, monkeypatch):
    monkeypatch.setattr(queries, "COUNT_LIMIT", 5)
    plain_episodes(keys, 12, sender_id="u4")
    page = page_text(viewer_client.get(url("episodes", light_scope.pk), {"sender": "u4", "limit": 10}))
    assert "More than 5 of 15 match (counting stops there)." in page
    assert "Showing 1–10." in page and " of 5." not in page


def test_an_unfiltered_list_counts_from_the_counters_and_a_filtered_one_is_bounded(
    viewer_client, url, light_scope, keys
):
    plain_episodes(keys, 30)
    with CaptureQueriesContext(connection) as unfiltered:
        page_text(viewer_client.get(url("episodes", light_scope.pk)))
    assert "COUNT(" not in " ".join(q["sql"].upper() for q in unfiltered.captured_queries)
    with CaptureQueriesContext(connection) as filtered:
        page_text(viewer_client.get(url("episodes", light_scope.pk), {"sender": "u5"}))
    counts = [q["sql"].upper() for q in filtered.captured_queries if "COUNT(" in q["sql"].upper()]
    assert len(counts) == 1 and "LIMIT" in counts[0] and "OFFSET" not in counts[0]


def test_the_page_is_a_fragment_for_htmx_with_its_count(viewer_client, url, light_scope):
    response = viewer_client.get(url("episodes", light_scope.pk), {"sort": "importance"}, **htmx("episode-list"))
    page = page_text(response)
    assert "<html" not in page and 'id="episode-count"' in page and "Most important first." in page


def test_another_scope_is_404_and_a_bad_cursor_400(granted_client, viewer_client, url, light_scope):
    assert granted_client.get(url("episodes", light_scope.pk), {"sort": "time"}).status_code == 404
    bad = viewer_client.get(url("episodes", light_scope.pk), {"cursor": "a12x.3"})
    assert bad.status_code == 400 and "This page link is not valid" in bad.content.decode()
    # An old id-only cursor or an overflowing time is refused the same way, never a 500.
    assert viewer_client.get(url("episodes", light_scope.pk), {"cursor": "a123"}).status_code == 400
    huge = viewer_client.get(url("episodes", light_scope.pk), {"cursor": "a999999999999999999.3"})
    assert huge.status_code == 400


def test_inline_actions_update_the_counts_out_of_band(operator_client, url, light_scope, keys):
    rows = plain_episodes(keys, 5, importance=lambda n: 5 if n < 3 else 1)
    back = url("episodes", light_scope.pk, query="importance=5")
    response = operator_client.post(
        url("episode_archive", light_scope.pk, rows[0].episode_id), {"next": back}, **htmx()
    )
    html = page_text(response)
    assert re.search(r'<span id="scope-counts" hx-swap-oob="innerHTML">\s*7 active, 1 archived', html)
    assert '<span id="episode-count" hx-swap-oob="true">2 of 7 match.</span>' in html
    assert html.index("</tr>") < html.index("<template>")  # the row first: htmx swaps it into its target
    # Found by a console user: the position and "select all that match" kept the counts from before.
    assert '<span id="episode-position" class="position" hx-swap-oob="true"> Showing 1–2 of 2.</span>' in html
    assert re.search(r'<span id="select-matching" hx-swap-oob="true">.*Select all 2 that match…</button>', html, re.S)


def test_the_list_shows_the_position_and_select_all_in_the_spans_an_action_replaces(
    operator_client, url, light_scope, keys
):
    plain_episodes(keys, 5, importance=lambda n: 5 if n < 3 else 1)
    page = page_text(operator_client.get(url("episodes", light_scope.pk, query="importance=5")))
    assert '<span id="episode-position" class="position"> Showing 1–3 of 3.</span>' in page
    assert re.search(r'<span id="select-matching">.*Select all 3 that match…</button>', page, re.S)


def test_a_viewer_may_not_act_inline(viewer_client, url, light_scope, keys):
    row = plain_episodes(keys, 1)[0]
    assert viewer_client.post(url("episode_archive", light_scope.pk, row.episode_id), **htmx()).status_code == 403


def test_a_count_no_index_narrows_is_estimated_from_the_newest_rows(viewer_client, url, light_scope, keys, monkeypatch):
    """Above COUNT_LIMIT rows, a tag or importance count reads only the newest COUNT_LIMIT index
    entries and extrapolates, saying so; a speaker's count stays exact (its index narrows it)."""
    monkeypatch.setattr(queries, "COUNT_LIMIT", 10)
    plain_episodes(keys, 20, importance=lambda n: 5 if n % 2 else 1, sender_id=lambda n: "u7" if n < 4 else "u5")
    page = page_text(viewer_client.get(url("episodes", light_scope.pk), {"importance": "5"}))
    assert "About 12 of 23 match (estimated from the newest 10,000)." in page  # 5 of the newest 10, × 23/10
    assert "Showing 1–10." in page and ">Select all that match…<" not in page  # a viewer: no bulk bar
    page = page_text(viewer_client.get(url("episodes", light_scope.pk), {"sender": "u7"}))
    assert "4 of 23 match." in page and "Showing 1–4 of 4." in page


def test_a_speakers_page_seeks_the_speakers_index(viewer_client, url, light_scope, keys):
    plain_episodes(keys, 30, sender_id=lambda n: f"s{n % 3}")
    with CaptureQueriesContext(connection) as captured:
        page_text(viewer_client.get(url("episodes", light_scope.pk), {"sender": "s1"}))
    with connection.cursor() as cursor:
        plans = []
        for query in captured.captured_queries:
            sql = query["sql"]
            if "memory_episode" in sql and ("COUNT(" in sql or 'ORDER BY "memory_episode"."timestamp"' in sql):
                cursor.execute(
                    "EXPLAIN " + query["sql"] if connection.vendor != "sqlite" else "EXPLAIN QUERY PLAN " + query["sql"]
                )
                plans.append(" ".join(str(row) for row in cursor.fetchall()))
    if connection.vendor == "sqlite":
        # The count from (scope, speaker, status) alone, the page by (scope, speaker, time, id) (0018).
        assert len(plans) >= 2 and "COVERING INDEX episode_scope_sender_status" in plans[0], plans
        assert all("episode_scope_sender_time" in plan for plan in plans[1:]), plans


@pytest.mark.parametrize(
    ("language", "phrases"),
    [
        ("es", ["9 de 23 coinciden.", "Mostrando 1–9 de 9.", "Primero los más importantes.", "Acciones del episodio"]),
        ("zh-hans", ["23 条中有 9 条匹配。", "显示第 1–9 条，共 9 条。", "最重要的在前。", "的操作"]),
    ],
)
def test_the_order_count_and_menu_are_translated(operator_client, url, light_scope, keys, language, phrases):
    plain_episodes(keys, 20, importance=lambda n: 5 if n < 9 else 1)
    operator_client.post("/i18n/setlang/", {"language": language, "next": "/"})
    page = page_text(operator_client.get(url("episodes", light_scope.pk), {"importance": "5", "sort": "importance"}))
    for phrase in phrases:
        assert phrase in page, phrase
