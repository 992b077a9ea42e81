"""Times in one zone (issue 17): chosen on the Time zone page, else the browser's (the cookie
console.js sets), else UTC; time filters read their input in the same zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memconsole.memory.models import Episode
from tests.factories import plain_episodes

from .conftest import htmx

pytestmark = pytest.mark.django_db

STAMP = datetime(2026, 7, 1, 10, 0, tzinfo=UTC)


@pytest.fixture
def timed(light_scope, keys):
    plain_episodes(keys, 2, start=10, timestamp=lambda n: STAMP + timedelta(hours=n - 10))  # 10:00 and 11:00 UTC
    return light_scope


def test_it_shows_times_in_utc_until_a_zone_is_known(viewer_client, url, timed):
    page = viewer_client.get(url("episode_detail", timed.pk, _first(timed))).content.decode()
    assert 'data-time-zone="server"' in page and "2026-07-01 11:00:00 UTC</time>" in page


def test_it_follows_the_browsers_zone_from_its_cookie(viewer_client, url, timed):
    viewer_client.cookies["memconsole_browser_tz"] = "Asia%2FShanghai"
    page = viewer_client.get(url("episode_detail", timed.pk, _first(timed))).content.decode()
    assert 'data-time-zone="browser"' in page
    assert 'title="2026-07-01 11:00:00 UTC">2026-07-01 19:00:00 CST</time>' in page


def test_a_chosen_zone_wins_and_the_filters_use_it(viewer_client, url, timed):
    viewer_client.cookies["memconsole_browser_tz"] = "Asia%2FShanghai"
    response = viewer_client.post(url("time_zone"), {"zone": "Europe/Paris", "next": url("episodes", timed.pk)})
    assert response.status_code == 302 and response["Location"] == url("episodes", timed.pk)
    page = viewer_client.get(url("episodes", timed.pk), {"after": "2026-07-01T12:30"}).content.decode()
    assert "From (Europe/Paris)" in page
    # 12:30 in Paris (CEST) is 10:30 UTC: only the 11:00 UTC episode (13:00 in Paris) is listed
    assert "bulk episode number 011" in page and "bulk episode number 010" not in page
    assert "2026-07-01 13:00:00 CEST" in page


def test_it_goes_back_to_the_browsers_zone(viewer_client, url, timed):
    viewer_client.post(url("time_zone"), {"zone": "Europe/Paris"})
    viewer_client.post(url("time_zone"), {"zone": "browser"})
    page = viewer_client.get(url("time_zone")).content.decode()
    assert "Times are shown in UTC" in page


def test_it_refuses_a_zone_that_does_not_exist(viewer_client, url):
    response = viewer_client.post(url("time_zone"), {"zone": "Mars/Olympus"}, **htmx())
    assert response.status_code == 400 and b"<html" not in response.content
    assert b"This is not a time zone name" in response.content


def test_it_ignores_a_forged_browser_cookie(viewer_client, url, timed):
    viewer_client.cookies["memconsole_browser_tz"] = "../../etc"
    assert b'data-time-zone="server"' in viewer_client.get(url("time_zone")).content


def test_it_needs_a_login(client, url):
    assert client.get(url("time_zone")).status_code == 302


def _first(scope) -> str:
    newest = Episode.objects.filter(user_key=scope.user_key).order_by("-id").first()
    assert newest is not None
    return newest.episode_id


def test_it_translates_the_time_zone_page_and_the_filter_labels(viewer_client, url, timed):
    viewer_client.post(url("time_zone"), {"zone": "Europe/Paris"})
    page = viewer_client.get(url("episodes", timed.pk), HTTP_ACCEPT_LANGUAGE="es").content.decode()
    assert "Desde (Europe/Paris)" in page and "Hasta (Europe/Paris)" in page
    zone_page = viewer_client.get(url("time_zone"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "使用此时区" in zone_page


@pytest.mark.parametrize("filter_name", ["after", "before"])
def test_it_refuses_a_filter_time_past_the_calendars_end_in_a_western_zone(viewer_client, url, timed, filter_name):
    viewer_client.cookies["memconsole_browser_tz"] = "America%2FLos_Angeles"
    for path in ("/audit/", url("audit", timed.pk), url("episodes", timed.pk)):
        response = viewer_client.get(path, {filter_name: "9999-12-31T23:59"})
        assert response.status_code == 400, path
        assert "Enter a date and time from 0001-01-02 to 9999-12-30 (UTC)." in response.content.decode()


def test_it_refuses_an_event_time_at_the_calendars_start(operator_client, url, timed):
    before = Episode.objects.count()
    response = operator_client.post(
        url("episode_add", timed.pk), {"content": "x", "importance": 2, "timestamp": "0001-01-01T00:00"}
    )
    assert response.status_code == 400 and Episode.objects.count() == before


def test_it_shows_a_time_stored_at_the_calendars_start_in_any_zone(viewer_client, url, timed):
    episode = Episode.objects.filter(scope_key=timed.scope_key).first()
    Episode.objects.filter(pk=episode.pk).update(timestamp=datetime(1, 1, 1, 0, 30, tzinfo=UTC))  # an older row
    viewer_client.cookies["memconsole_browser_tz"] = "Etc%2FGMT%2B12"
    for path in (url("episode_detail", timed.pk, episode.episode_id), url("episodes", timed.pk, query="cursor=z")):
        assert viewer_client.get(path).status_code in (200, 400), path
    page = viewer_client.get(url("episode_detail", timed.pk, episode.episode_id)).content.decode()
    assert "0001-01-01 00:30:00 UTC</time>" in page


def test_the_episode_form_names_the_zone_its_times_are_read_in(operator_client, url, timed):
    """Found by a user: the form said "Times are in UTC." in every zone, while it read and showed
    the event time in the chosen one, so a user typing UTC stored a time hours off."""
    operator_client.post(url("time_zone"), {"zone": "Asia/Kolkata"})
    for path in (url("episode_add", timed.pk), url("episode_edit", timed.pk, _first(timed))):
        page = operator_client.get(path).content.decode()
        assert "Times are in Asia/Kolkata." in page and "Times are in UTC." not in page, path


# Los Angeles repeats 01:00-02:00 on 2026-11-01 (PDT, then PST) and skips 02:00-03:00 on 2026-03-08.
FIRST_0130 = datetime(2026, 11, 1, 8, 30, tzinfo=UTC)  # 01:30 PDT
SECOND_0130 = datetime(2026, 11, 1, 9, 30, tzinfo=UTC)  # 01:30 PST


@pytest.mark.parametrize("stored", [FIRST_0130, SECOND_0130], ids=["first", "second"])
def test_an_episode_in_the_repeated_hour_can_be_edited_and_keeps_its_time(operator_client, url, timed, stored):
    """Found by a console user: an episode at 01:30 on the night the clocks go back could not be
    saved at all: the form showed 01:30 and refused it as ambiguous."""
    episode_id = _first(timed)
    Episode.objects.filter(episode_id=episode_id).update(timestamp=stored)
    operator_client.post(url("time_zone"), {"zone": "America/Los_Angeles"})
    form = operator_client.get(url("episode_edit", timed.pk, episode_id)).content.decode()
    assert 'value="2026-11-01T01:30"' in form

    response = operator_client.post(
        url("episode_edit", timed.pk, episode_id),
        {
            "content": "bulk episode number 011",
            "tags": "night",
            "importance": 2,
            "timestamp": "2026-11-01T01:30",
            "version": 0,
        },
    )

    assert response.status_code in (200, 302), response.content.decode()[:500]
    episode = Episode.objects.get(episode_id=episode_id)
    assert episode.tags == ["night"] and episode.timestamp == stored


def test_a_filter_in_the_repeated_hour_reads_as_its_first_occurrence(viewer_client, url, timed):
    viewer_client.post(url("time_zone"), {"zone": "America/Los_Angeles"})
    response = viewer_client.get(url("episodes", timed.pk), {"after": "2026-11-01T01:30"})
    assert response.status_code == 200


def test_a_time_the_clocks_skip_is_still_refused(viewer_client, url, timed):
    viewer_client.post(url("time_zone"), {"zone": "America/Los_Angeles"})
    response = viewer_client.get(url("episodes", timed.pk), {"after": "2026-03-08T02:30"})
    assert response.status_code == 400 and "may not exist" in response.content.decode()
