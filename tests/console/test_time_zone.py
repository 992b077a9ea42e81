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
