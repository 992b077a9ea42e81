"""The Episodes list in Chromium (issue 17): order by event time or importance, the filtered count,
the position and first/last page links; counts that follow inline actions (out of band); bulk by
filter with its preview and one audited batch; one actions menu per row, with JavaScript (no
native dialog for archive, an Undo) and without it."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from memconsole.memory.models import AuditEntry, Episode

from .conftest import PHONE, Console, Seeded, accept_dialogs, playwright_expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

expect = playwright_expect()


def row_ids(console: Console) -> list[str]:
    ids = console.page.locator("tr.episode-row").evaluate_all("rows => rows.map(r => r.id)")
    return [row_id.removeprefix("episode-") for row_id in ids]


def open_menu(row):
    row.locator("details.row-menu > summary").click()
    return row.locator(".row-menu-items")


@pytest.mark.browser
def test_it_orders_by_event_time_counts_and_pages_to_the_last_page(
    console: Console, seeded: Seeded, admin_user
) -> None:
    page = console.page
    # The oldest stored episode happened last: "Newest first" must put it on top (by event time, not id).
    late = seeded.episode_ids[3]
    stored = Episode.objects.get(episode_id=late)
    assert stored.timestamp is not None
    Episode.objects.filter(pk=stored.pk).update(timestamp=stored.timestamp + timedelta(days=5))
    console.log_in("admin")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/?limit=10")
    summary = page.locator("p.summary")
    expect(summary).to_contain_text("23 active episodes in this space.")
    expect(summary).to_contain_text("Showing 1–10 of 23.")
    expect(summary).to_contain_text("Newest first, by event time.")
    assert row_ids(console)[0] == late

    page.get_by_role("link", name="Last page").click()
    expect(summary).to_contain_text("Showing 21–23 of 23.")
    assert len(row_ids(console)) == 3
    expect(page.get_by_role("link", name="Last page")).to_have_count(0)
    page.get_by_role("link", name="Previous", exact=True).click()
    expect(summary).to_contain_text("Showing 11–20 of 23.")
    page.get_by_role("link", name="First page").click()
    expect(summary).to_contain_text("Showing 1–10 of 23.")

    page.get_by_label("Order").select_option("importance")
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"sort=importance"))
    expect(summary).to_contain_text("Most important first.")
    assert row_ids(console)[0] == seeded.trip_id  # importance 4, the only one above 2

    page.get_by_label("Tag").fill("note")
    page.get_by_role("button", name="Apply filters").click()
    expect(page.locator("#episode-count")).to_have_text("21 of 23 match.")

    # Found by a console user: changing the language after filtering went back to the unfiltered list.
    page.get_by_label("Language").select_option("es")
    page.get_by_role("button", name="Change language").click()
    expect(page.locator("html")).to_have_attribute("lang", "es")
    expect(page).to_have_url(re.compile(r"tag=note"))
    expect(page.locator("#episode-count")).to_contain_text("21")


@pytest.mark.browser
def test_inline_archive_has_no_dialog_updates_the_counts_and_can_be_undone(
    console: Console, seeded: Seeded, admin_user
) -> None:
    page = console.page
    dialogs = accept_dialogs(console)
    console.log_in("admin")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/?tag=note&limit=10")
    expect(page.locator("#episode-count")).to_have_text("21 of 23 match.")
    row = page.locator("tr.episode-row").first
    row_id = row.get_attribute("id")
    menu = open_menu(row)
    menu.get_by_role("button", name="Archive", exact=True).click()
    row = page.locator(f"#{row_id}")
    expect(row.get_by_text("Archived", exact=True)).to_be_visible()
    # The counts came with the row (out of band), without reloading the list.
    expect(page.locator("#episode-count")).to_have_text("20 of 22 match.")
    expect(page.locator("#scope-counts")).to_contain_text("22 active, 1 archived")
    undo = row.get_by_role("button", name=re.compile(r"^Undo: restore episode"))
    expect(undo).to_be_focused()  # the keyboard is put right on it
    undo.click()
    expect(row.get_by_text("Active", exact=True)).to_be_visible()
    expect(page.locator("#episode-count")).to_have_text("21 of 23 match.")
    expect(row.get_by_role("button", name=re.compile("^Undo"))).to_have_count(0)
    assert dialogs == []  # archive and restore ask nothing

    # Delete asks, and says truthfully what the audit log keeps.
    menu = open_menu(row)
    menu.get_by_role("button", name="Delete…").click()
    expect(row).to_contain_text("was deleted.")
    assert (
        dialogs
        and "The audit log keeps a copy of its content (its before-image) unless the person is erased." in dialogs[-1]
    )
    expect(page.locator("#episode-count")).to_have_text("20 of 22 match.")


@pytest.mark.browser
def test_the_row_menu_opens_and_closes_and_links_the_episode(console: Console, seeded: Seeded, admin_user) -> None:
    page = console.page
    console.log_in("admin")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/?limit=25")
    rows = page.locator("tr.episode-row")
    expect(rows).to_have_count(23)
    # One menu a row instead of stacked buttons: 23 rows stay compact.
    height = page.locator("table.episodes").bounding_box()["height"]
    assert height < 23 * 110, height
    menu = rows.first.locator("details.row-menu")
    expect(menu.get_by_role("button", name="Archive")).to_be_hidden()
    menu.locator("summary").click()
    expect(menu.get_by_role("button", name="Archive")).to_be_visible()
    page.keyboard.press("Escape")
    expect(menu.get_by_role("button", name="Archive")).to_be_hidden()
    menu.locator("summary").click()
    page.mouse.click(5, 5)
    expect(menu.get_by_role("button", name="Archive")).to_be_hidden()
    menu.locator("summary").click()
    menu.get_by_role("link", name="Open").click()
    expect(page).to_have_url(re.compile(r"/episodes/[0-9a-f]{12}/$"))
    # Found by a console user: the way back lost the list's filters and page.
    page.get_by_role("link", name="Back to the episode list").click()
    expect(page).to_have_url(re.compile(r"/episodes/\?limit=25$"))


@pytest.mark.browser
def test_the_row_menu_and_bulk_by_filter_work_without_javascript(
    browser, one_request_at_a_time, seeded: Seeded, admin_user
) -> None:
    context = browser.new_context(java_script_enabled=False, viewport=PHONE, locale="en-GB")
    try:
        page = context.new_page()
        console = Console(page, one_request_at_a_time.url, context)
        console.log_in("admin")
        console.goto(f"/scopes/{seeded.scope.pk}/episodes/?limit=10")
        row = page.locator("tr.episode-row").first
        victim = row.get_attribute("id").removeprefix("episode-")
        open_menu(row).get_by_role("button", name="Archive", exact=True).click()
        expect(page.get_by_text(f"Episode {victim} is archived.")).to_be_visible()
        assert Episode.objects.get(episode_id=victim).status == "archived"
        row = page.locator("tr.episode-row").first
        open_menu(row).get_by_role("button", name="Delete…").click()
        expect(page.get_by_text("The audit log keeps a copy of its content (its before-image)")).to_be_visible()
        page.get_by_role("link", name="Cancel").click()

        console.goto(f"/scopes/{seeded.scope.pk}/episodes/?tag=note")
        page.get_by_label("Bulk action").select_option("restore")
        page.get_by_role("button", name="Select all 20 that match…").click()
        expect(page.get_by_text("20 episodes match; 0 will be restored.")).to_be_visible()
    finally:
        context.close()


@pytest.mark.browser
def test_it_archives_every_episode_that_matches_as_one_batch(console: Console, seeded: Seeded, admin_user) -> None:
    page = console.page
    dialogs = accept_dialogs(console)
    console.log_in("admin")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/?tag=note&limit=10")
    page.get_by_label("Bulk action").select_option("archive")
    page.get_by_role("button", name="Select all 21 that match…").click()
    preview = page.locator("#bulk-result")
    expect(preview).to_contain_text("21 episodes match; 21 will be archived.")
    expect(preview).to_contain_text("The first 21 of 21:")
    expect(preview.locator("ol.bulk-episodes li")).to_have_count(21)
    assert Episode.objects.filter(status="archived").count() == 0
    preview.get_by_role("button", name="Confirm").click()
    expect(preview.get_by_role("status")).to_have_text("21 episodes archived.")
    expect(page.locator("#scope-counts")).to_contain_text("2 active, 21 archived")
    batch_ids = set(AuditEntry.objects.filter(operation="archive").values_list("batch_id", flat=True))
    assert len(batch_ids) == 1 and "" not in batch_ids
    preview.get_by_role("link", name="See this batch in the audit log").click()
    expect(page).to_have_url(re.compile(r"/audit/\?batch=[0-9a-f]{32}$"))
    expect(page.locator("table.audit tbody tr")).to_have_count(21)
    console.goto("/audit/")
    expect(page.get_by_role("link", name="One bulk action of 21 entries: show them all")).to_be_visible()
    assert dialogs == []
