"""Explaining an answer in Chromium (issue 18): a snapshot with its near misses, "Replay now",
fixing a memory from the answer, the Health tab's charts and CSV, and what the bot knew at a
moment. The snapshot and replay screenshots are the README's tour (docs/tour/)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memconsole.memory.models import Episode, InjectionSnapshot

from .conftest import Console, Seeded, playwright_expect

expect = playwright_expect()

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_snapshot_is_explained_replayed_and_fixed(console: Console, seeded: Seeded, operator) -> None:
    snapshot = InjectionSnapshot.objects.filter(query_id="q-1").get()
    console.log_in("operator")
    console.goto(f"/scopes/{seeded.scope.pk}/injection/{snapshot.snapshot_id}/")
    page = console.page
    expect(page.get_by_role("heading", name="Why these memories")).to_be_visible()
    expect(page.get_by_role("heading", name="Near misses")).to_be_visible()
    expect(page.get_by_role("heading", name="Injected", exact=True)).to_be_visible()
    console.screenshot("tour-snapshot")

    page.get_by_role("link", name="Replay now").click()
    expect(page.get_by_role("heading", name="Replayed against today’s memory")).to_be_visible()
    expect(page.get_by_text("The same memories would be injected today, in the same order.")).to_be_visible()

    page.get_by_role("link", name="Back to the snapshot").click()
    fix = page.locator(".fix-item").filter(has_text="Beijing")
    fix.get_by_label("Fix").select_option("archive")
    fix.get_by_label("Why is it wrong?").fill("the trip was cancelled")
    fix.get_by_role("button", name="Apply").click()
    expect(page.get_by_text("Archived: the bot will not use this memory again until it is restored.")).to_be_visible()
    assert Episode.objects.get(episode_id=seeded.trip_id).status == "archived"

    page.get_by_role("link", name="Replay now").click()
    row = page.locator("tr").filter(has_text="Beijing")
    expect(row).to_contain_text("dropped")
    expect(row).to_contain_text("archived since")
    console.screenshot("tour-replay")


def test_the_health_tab_draws_charts_and_gives_the_numbers(console: Console, seeded: Seeded, operator) -> None:
    console.log_in("operator")
    console.goto(f"/scopes/{seeded.scope.pk}/insights/")
    page = console.page
    expect(page.get_by_role("img", name="Injections per day")).to_be_visible()
    assert page.locator("figure.chart svg").count() == 6
    page.get_by_label("Period").select_option("7")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("heading", name=re.compile("the last 7 days"))).to_be_visible()
    with page.expect_download() as download:
        page.get_by_role("link", name="Download the numbers (CSV)").click()
    lines = Path(download.value.path()).read_text(encoding="utf-8").splitlines()
    assert lines[0] == "day,injections,without_memory,chars_injected,stored,archived,superseded"
    assert len(lines) == 8
    assert lines[-1].split(",")[1] == "2"  # the seeded two injections, today


def test_what_the_bot_knew_yesterday(console: Console, seeded: Seeded, operator) -> None:
    console.log_in("operator")
    console.goto(f"/scopes/{seeded.scope.pk}/known-at/")
    page = console.page
    yesterday = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")  # the browser is in UTC
    page.get_by_label(re.compile("^At ")).fill(yesterday)
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("heading", name=re.compile("^Known at"))).to_be_visible()
    expect(page.get_by_text("The bot knew no memory of this space at that moment.")).to_be_visible()
    page.get_by_label(re.compile("^At ")).fill("")
    page.get_by_label(re.compile("^Compare with ")).fill(yesterday)
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("heading", name="Learned")).to_be_visible()
    expect(page.get_by_text("I am planning a trip to Beijing next month").first).to_be_visible()
