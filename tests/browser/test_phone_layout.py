"""The console on a phone-width screen (390 px) and in Chinese, in real Chromium: tables read as
cards with every action on screen, a compact header, filters folded away unless in use; the
numbers a search used stay in its form; score factors and sentences read naturally in Chinese."""

from __future__ import annotations

import re

import pytest
from django.utils import translation

from memconsole.memory import episodes, profiles
from memconsole.memory.audit import Actor

from .conftest import DESKTOP, PHONE, Console, Seeded, playwright_expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

expect = playwright_expect()

STACKED_TABLES = {  # page -> a selector of the stacked table's rows
    "episodes": "table.episodes tbody tr",
    "audit": "table.audit tbody tr",
    "injection": "#injection-history table tbody tr",
    "overview": "#scope-list table tbody tr",
}


def paths(seeded: Seeded) -> dict[str, str]:
    scope = f"/scopes/{seeded.scope.pk}"
    return {
        "episodes": f"{scope}/episodes/?status=all&limit=10",
        "audit": f"{scope}/audit/",
        "injection": f"{scope}/injection/",
        "overview": "/",
    }


def chinese(console: Console) -> None:
    page = console.page
    page.get_by_label("Language").select_option("zh-hans")
    page.get_by_role("button", name="Change language").click()
    page.wait_for_function("() => document.documentElement.lang === 'zh-hans'")


def within_screen(locator) -> bool:
    """Whether the element lies across the phone's width, without any sideways scrolling."""
    box = locator.bounding_box()
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]


def table_roles(console: Console) -> dict[str, int]:
    """Roles in Chromium's own accessibility tree (what a screen reader gets), counted."""
    session = console.context.new_cdp_session(console.page)
    counts: dict[str, int] = {}
    for node in session.send("Accessibility.getFullAXTree")["nodes"]:
        role = node.get("role", {}).get("value")
        if role in ("table", "row", "cell", "columnheader"):
            counts[role] = counts.get(role, 0) + 1
    session.detach()
    return counts


@pytest.mark.browser
def test_it_shows_wide_tables_as_cards_on_a_phone_with_every_action_on_screen(
    new_console, seeded: Seeded, admin_user
) -> None:
    console = new_console(viewport=PHONE)
    page = console.page
    console.log_in("admin")
    problems = []
    for name, path in paths(seeded).items():
        console.goto(path)
        page.wait_for_load_state("load")
        if page.evaluate("document.documentElement.scrollWidth") > PHONE["width"]:
            problems.append(f"{name}: the page scrolls sideways")
        rows = page.locator(STACKED_TABLES[name])
        assert rows.count() > 0, name
        first = rows.first
        # Each cell is a labelled line of the card, the label taken from data-label.
        labels = first.locator("td[data-label]").evaluate_all(
            "cells => cells.map(c => [getComputedStyle(c).display, getComputedStyle(c, '::before').content])"
        )
        if not labels or any(display == "table-cell" or "attr" in content for display, content in labels):
            problems.append(f"{name}: the cells are not stacked with labels: {labels}")
        # Everything a row shows, buttons and text, lies within the screen.
        overflowing = first.locator("button, a, code, td").evaluate_all(
            f"els => els.filter(e => e.getBoundingClientRect().right > {PHONE['width']} + 1).map(e => e.outerHTML.slice(0, 80))"
        )
        if overflowing:
            problems.append(f"{name}: off screen: {overflowing}")
        roles = table_roles(console)
        if not (roles.get("table") and roles.get("row", 0) > 1 and roles.get("cell") and roles.get("columnheader")):
            problems.append(f"{name}: the table lost its semantics for screen readers: {roles}")
    assert not problems, "\n".join(problems)

    # The row actions, on screen and working; the re-rendered row is a card again.
    console.goto(paths(seeded)["episodes"])
    page.on("dialog", lambda dialog: dialog.accept())
    row = page.locator("tr.episode-row").first
    row.locator("details.row-menu > summary").click()  # one actions menu a row
    archive = row.get_by_role("button", name="Archive")
    assert within_screen(archive) and within_screen(row.get_by_role("button", name="Delete…"))
    row_id = row.get_attribute("id")
    archive.click()
    row = page.locator(f"#{row_id}")
    expect(row.get_by_text("Archived", exact=True)).to_be_visible()
    assert row.locator("td[data-label]").count() >= 6
    assert row.locator("td").first.evaluate("c => getComputedStyle(c).display") != "table-cell"
    row.locator("details.row-menu > summary").click()
    assert within_screen(row.get_by_role("button", name="Restore", exact=True))
    # On a wide screen the same table is a table.
    page.set_viewport_size(DESKTOP)
    assert row.locator("td").first.evaluate("c => getComputedStyle(c).display") == "table-cell"


@pytest.mark.browser
def test_it_folds_the_header_into_a_menu_on_a_phone(new_console, seeded: Seeded, admin_user) -> None:
    console = new_console(viewport=PHONE)
    page = console.page
    console.log_in("admin")
    console.goto(paths(seeded)["episodes"])
    header = page.locator("header.topbar")
    assert header.bounding_box()["height"] < 120
    nav = page.get_by_role("navigation", name="Main")
    expect(nav).to_be_hidden()
    expect(page.get_by_role("button", name="Log out")).to_be_hidden()
    expect(page.get_by_label("Language")).to_be_visible()  # the way back from a language one cannot read

    page.locator("details.menu > summary").click()
    expect(nav.get_by_role("link", name="Import")).to_be_visible()
    expect(page.get_by_role("button", name="Log out")).to_be_in_viewport()
    page.mouse.click(5, 600)  # a click elsewhere (the page's left margin) closes it
    expect(nav).to_be_hidden()

    page.set_viewport_size(DESKTOP)  # wide: everything in line, no menu button
    expect(page.locator("details.menu > summary")).to_be_hidden()
    expect(nav.get_by_role("link", name="Import")).to_be_visible()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    assert header.bounding_box()["height"] < 80


@pytest.mark.browser
def test_it_folds_the_episode_filters_unless_one_is_in_use(new_console, seeded: Seeded, admin_user) -> None:
    console = new_console(viewport=PHONE)
    page = console.page
    console.log_in("admin")
    episodes = f"/scopes/{seeded.scope.pk}/episodes/"
    console.goto(episodes)
    filters = page.locator("details.filter-panel")
    expect(filters).not_to_have_attribute("open", re.compile(".*"))
    expect(page.get_by_label("Status")).to_be_hidden()
    expect(page.locator("p.summary")).to_be_in_viewport()  # the list starts on the first screen

    filters.locator("summary").click()
    page.get_by_label("Tag").fill("travel")
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"tag=travel"))
    expect(filters).to_have_attribute("open", "")
    expect(filters.locator("summary")).to_have_text("Filters (1 in use)")
    expect(page.locator("tr.episode-row")).to_have_count(1)

    console.goto(episodes + "?status=all&tag=travel&importance=3")
    expect(filters.locator("summary")).to_have_text("Filters (3 in use)")
    expect(page.get_by_label("Status")).to_be_visible()

    page.set_viewport_size(DESKTOP)
    console.goto(episodes)  # wide: the filters are always shown
    expect(page.get_by_label("Status")).to_be_visible()
    expect(filters.locator("summary")).to_be_hidden()


@pytest.mark.browser
def test_it_keeps_the_number_of_results_after_a_search(console: Console, seeded: Seeded, admin_user) -> None:
    page = console.page
    console.log_in("admin")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/")
    top_k = page.get_by_label("Number of results")
    expect(top_k).to_have_value("10")
    page.get_by_label("Search episodes").fill("Alice mentioned a topic")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.get_by_text("10 results for this search.")).to_be_visible()
    expect(top_k).to_have_value("10")

    top_k.fill("3")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.get_by_text("3 results for this search.")).to_be_visible()
    expect(top_k).to_have_value("3")
    page.get_by_label("Search episodes").fill("Bob mentioned a topic")
    page.get_by_label("Search episodes").press("Enter")
    expect(page).to_have_url(re.compile(r"q=Bob"))
    expect(page.get_by_text("3 results for this search.")).to_be_visible()
    expect(top_k).to_have_value("3")
    page.reload()
    expect(top_k).to_have_value("3")


@pytest.mark.browser
def test_it_translates_the_score_factors_into_chinese(console: Console, seeded: Seeded, admin_user) -> None:
    page = console.page
    console.log_in("admin")
    chinese(console)
    factors = ("similarity", "lexical", "relevance", "recency", "importance", "speaker", "update", "exact")
    with translation.override("zh-hans"):
        names = {factor: translation.gettext(factor) for factor in factors}
    assert all(re.search(r"[\u4e00-\u9fff]", name) for name in names.values()), names

    for path in (f"/scopes/{seeded.scope.pk}/episodes/?q=trip+to+Beijing", f"/scopes/{seeded.scope.pk}/injection/"):
        console.goto(path)
        breakdown = page.locator("dl.breakdown").first
        expect(breakdown).to_be_visible()
        keys = breakdown.locator("[data-factor]").evaluate_all("items => items.map(i => i.dataset.factor)")
        assert keys == list(factors), path  # the keys stay as the ranking names them
        shown = breakdown.locator("dt").all_inner_texts()
        assert shown == [names[factor] for factor in factors], (path, shown)


@pytest.mark.browser
def test_it_puts_no_space_after_a_chinese_full_stop(new_console, seeded: Seeded, admin_user) -> None:
    episodes.archive(seeded.keys, Actor.system("tests"), [seeded.trip_id])
    console = new_console(viewport=PHONE)
    page = console.page
    console.log_in("admin")
    chinese(console)
    scope, other = f"/scopes/{seeded.scope.pk}", f"/scopes/{seeded.other_scope.pk}"
    pages = [
        "/",
        "/?q=nothing-like-this",
        f"{scope}/episodes/",
        f"{scope}/episodes/?status=archived",
        f"{scope}/episodes/?status=all&cursor=a1.1",
        f"{scope}/episodes/?tag=none",
        f"{scope}/episodes/?q=trip",
        f"{scope}/episodes/{seeded.trip_id}/",
        f"{scope}/profiles/",
        f"{other}/profiles/",
        f"{other}/profiles/session/",
        f"{scope}/injection/",
        f"{scope}/injection/?cursor=a1",
        f"{scope}/audit/",
        f"{scope}/audit/?cursor=a1",
        f"{scope}/export/",
        "/diagnostics/",
        "/import/",
        "/erasure/",
    ]
    stray = []
    for path in pages:
        console.goto(path)
        text = page.evaluate("document.body.innerText")
        stray += [
            f"{path}: …{text[max(0, m.start() - 20) : m.end() + 10]!r}"
            for m in re.finditer(r"[。！？，；：][ \t\u00a0]+\S", text)
        ]
    assert not stray, "\n".join(stray)


@pytest.mark.browser
def test_the_profile_versions_and_the_overview_fit_a_phone(new_console, seeded: Seeded, admin_user) -> None:
    """Issue 17: at 390 px the version table kept "Roll back" past the screen's edge (inside a box
    scrolling sideways), and the overview took a screen per space."""
    tests = Actor.system("tests")
    profiles.update_profile(seeded.keys, tests, "speaker", "u1", add_traits=["tea"])
    console = new_console(viewport=PHONE)
    page = console.page
    console.log_in("admin")
    console.goto(f"/scopes/{seeded.scope.pk}/profiles/speaker/?sender=u1")
    roll_back = page.get_by_role("button", name="Roll back to version 1")
    roll_back.scroll_into_view_if_needed()
    assert within_screen(roll_back)
    assert page.evaluate("[...document.querySelectorAll('.table-wrap')].every(w => w.scrollWidth <= w.clientWidth + 1)")
    console.goto("/")
    cards = page.locator("#scope-list tbody tr")
    expect(cards.first).to_be_visible()
    for index in range(cards.count()):
        assert cards.nth(index).bounding_box()["height"] < 200
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
