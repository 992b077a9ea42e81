"""The Episodes list's Usage filter in Chromium (issue 18): "never used" and "used in the last N
days" narrow the list and its count, a bad N is refused beside the field, and the filter stays in
the address while paging."""

from __future__ import annotations

import re

import pytest

from memconsole.memory.usage_models import EpisodeUse

from .conftest import EPISODE_COUNT, Console, Seeded, playwright_expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

expect = playwright_expect()


def row_ids(console: Console) -> set[str]:
    ids = console.page.locator("tr.episode-row").evaluate_all("rows => rows.map(r => r.id)")
    return {row_id.removeprefix("episode-") for row_id in ids}


@pytest.mark.browser
def test_it_filters_never_used_and_recently_used_episodes(console: Console, seeded: Seeded, admin_user) -> None:
    page = console.page
    # The seed's two injections (the Beijing trip, the pasted markup) used these episodes.
    used = set(EpisodeUse.objects.filter(user_key=seeded.keys.user_key).values_list("episode_id", flat=True))
    assert seeded.trip_id in used
    console.log_in("admin")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/?limit=10")
    count = page.locator("#episode-count")
    expect(count).to_have_text(f"{EPISODE_COUNT} active episodes in this space.")

    page.get_by_label("Usage").select_option(label="Never used")
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"usage=never"))
    expect(count).to_have_text(f"{EPISODE_COUNT - len(used)} of {EPISODE_COUNT} match.")
    assert not row_ids(console) & used

    page.get_by_role("link", name="Next").click()  # the filter stays across pages
    expect(page).to_have_url(re.compile(r"usage=never.*cursor=|cursor=.*usage=never"))
    expect(count).to_have_text(f"{EPISODE_COUNT - len(used)} of {EPISODE_COUNT} match.")
    assert not row_ids(console) & used

    page.get_by_label("Usage").select_option(label="Used in the last N days")
    page.get_by_label("N (days)").fill("0")
    page.get_by_role("button", name="Apply filters").click()
    expect(page.locator("#id_used_days_error")).to_have_text("Enter a whole number of days from 1 to 365.")
    expect(page.locator("tr.episode-row")).to_have_count(0)

    page.get_by_label("N (days)").fill("7")
    page.get_by_role("button", name="Apply filters").click()
    expect(count).to_have_text(f"{len(used)} of {EPISODE_COUNT} match.")
    assert row_ids(console) == used
    expect(page.get_by_role("button", name=re.compile(r"Select (all|the) .* that match"))).to_contain_text(
        str(len(used))
    )
    console.screenshot("episodes-used-recently")
