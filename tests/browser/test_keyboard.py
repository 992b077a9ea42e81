"""The console with the keyboard alone (issue 3: keyboard-reachable actions): Tab to the search and
search, Tab to a row's actions menu and archive with Enter or Space, work the theme toggle and
the phone menu, and see where the focus is on every stop."""

from __future__ import annotations

import re

import pytest

from memconsole.memory.models import Episode

from .conftest import PHONE, Console, Seeded, accept_dialogs, playwright_expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

expect = playwright_expect()

MAX_TABS = 120

# What the focused element is, in words a failure message can show.
DESCRIBE_FOCUS = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return "body";
  const name = el.getAttribute("aria-label") || el.id || (el.textContent || "").trim().slice(0, 40);
  return `${el.tagName.toLowerCase()}: ${name}`;
}"""


def tab_until(console: Console, predicate: str, *, shift: bool = False) -> list[str]:
    """Presses Tab until `predicate` (a JS function of document.activeElement) holds; returns the
    stops on the way. Fails after MAX_TABS presses."""
    page = console.page
    stops: list[str] = []
    for _ in range(MAX_TABS):
        page.keyboard.press("Shift+Tab" if shift else "Tab")
        stops.append(page.evaluate(DESCRIBE_FOCUS))
        if page.evaluate(f"({predicate})(document.activeElement)"):
            return stops
    raise AssertionError(f"never reached the element with Tab; stops: {stops}")


def focus_ring(console: Console) -> dict[str, str]:
    return console.page.evaluate(
        """() => { const s = getComputedStyle(document.activeElement);
                   return {style: s.outlineStyle, width: s.outlineWidth, color: s.outlineColor}; }"""
    )


@pytest.mark.browser
def test_it_searches_with_the_keyboard_alone(console: Console, seeded: Seeded, admin_user) -> None:
    page = console.page
    console.log_in("admin")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/")

    stops = tab_until(console, "el => el.id === 'id_q'")
    assert stops[0] == "a: Skip to the content"  # the first stop skips the header
    page.keyboard.type("planning a trip to Beijing")
    page.keyboard.press("Enter")
    expect(page.get_by_text(re.compile(r"\d+ results? for this search"))).to_be_visible()
    expect(page).to_have_url(re.compile(r"q=planning(\+|%20)a(\+|%20)trip"))
    expect(page.locator("tr.episode-row").first).to_have_id(f"episode-{seeded.trip_id}")
    expect(page.get_by_label("Number of results")).to_have_value("10")  # the number used, not an empty field


@pytest.mark.browser
def test_it_archives_a_row_with_enter_and_with_space(console: Console, seeded: Seeded, admin_user) -> None:
    page = console.page
    dialogs = accept_dialogs(console)
    newest = list(reversed(seeded.episode_ids))
    console.log_in("admin")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/?limit=10")

    # Each row has one actions menu (a <details>): Tab to it, open it with Enter, Tab to Archive.
    page.get_by_label("Search episodes").focus()
    first = page.locator(f"#episode-{newest[0]}")
    tab_until(console, f"el => el.getAttribute('aria-label') === 'Actions for episode {newest[0]}'")
    page.keyboard.press("Enter")
    tab_until(console, "el => el.tagName === 'BUTTON' && el.textContent.trim() === 'Archive'")
    expect(first.get_by_role("button", name="Archive")).to_be_focused()
    page.keyboard.press("Enter")
    expect(first.get_by_text("Archived", exact=True)).to_be_visible()
    assert dialogs == []  # no confirmation: an Undo instead
    # The row was replaced, and the focus stays in it (on its Undo) instead of falling to the page.
    expect(first.get_by_role("button", name=f"Undo: restore episode {newest[0]}")).to_be_focused()
    assert focus_ring(console)["style"] == "solid"

    second = page.locator(f"#episode-{newest[1]}")
    tab_until(console, f"el => el.getAttribute('aria-label') === 'Actions for episode {newest[1]}'")
    page.keyboard.press("Space")
    tab_until(console, "el => el.tagName === 'BUTTON' && el.textContent.trim() === 'Archive'")
    expect(second.get_by_role("button", name="Archive")).to_be_focused()
    page.keyboard.press("Space")
    expect(second.get_by_text("Archived", exact=True)).to_be_visible()
    assert set(Episode.objects.filter(status="archived").values_list("episode_id", flat=True)) == {newest[0], newest[1]}

    # Delete the same way (it asks first): the row turns into its status line, and the focus waits there.
    undo = second.get_by_role("button", name=f"Undo: restore episode {newest[1]}")
    expect(undo).to_be_focused()
    tab_until(console, f"el => el.getAttribute('aria-label') === 'Actions for episode {newest[1]}'")
    page.keyboard.press("Enter")
    tab_until(console, "el => el.tagName === 'BUTTON' && el.textContent.trim() === 'Delete…'")
    page.keyboard.press("Enter")
    expect(second).to_have_text(f"Episode {newest[1]} was deleted.")
    expect(second.get_by_role("status")).to_be_focused()
    assert dialogs and dialogs[-1].startswith(f"Delete episode {newest[1]}?")
    assert not Episode.objects.filter(episode_id=newest[1]).exists()


@pytest.mark.browser
def test_it_switches_the_theme_with_the_keyboard(console: Console, seeded: Seeded, admin_user) -> None:
    page = console.page
    console.log_in("admin")
    html = page.locator("html")
    toggle = page.get_by_role("button", name="Dark theme")
    expect(toggle).to_have_attribute("aria-pressed", "false")

    tab_until(console, "el => el.id === 'theme-toggle'")
    expect(toggle).to_be_focused()
    page.keyboard.press("Enter")
    expect(html).to_have_attribute("data-theme", "dark")
    expect(toggle).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("Space")
    expect(html).to_have_attribute("data-theme", "light")
    expect(toggle).to_have_attribute("aria-pressed", "false")


@pytest.mark.browser
def test_it_opens_the_phone_menu_with_the_keyboard(new_console, seeded: Seeded, admin_user) -> None:
    console = new_console(viewport=PHONE)
    page = console.page
    console.log_in("admin")
    menu = page.locator("details.menu")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav).to_be_hidden()

    tab_until(console, "el => el.tagName === 'SUMMARY' && el.closest('details.menu')")
    page.keyboard.press("Enter")
    expect(menu).to_have_attribute("open", "")
    expect(nav.get_by_role("link", name="Memory spaces")).to_be_visible()
    page.keyboard.press("Tab")
    expect(nav.get_by_role("link", name="Memory spaces")).to_be_focused()
    tab_until(console, "el => el.id === 'theme-toggle'")
    page.keyboard.press("Enter")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")

    page.keyboard.press("Escape")  # closes the menu and gives the focus back to its summary
    expect(nav).to_be_hidden()
    expect(page.locator("details.menu > summary")).to_be_focused()
    page.keyboard.press("Space")
    expect(nav).to_be_visible()
    page.keyboard.press("Space")
    expect(nav).to_be_hidden()


@pytest.mark.browser
@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_it_draws_a_visible_focus_ring_on_every_stop(new_console, seeded: Seeded, admin_user, width: str) -> None:
    console = new_console(viewport=PHONE) if width == "phone" else new_console()
    page = console.page
    console.log_in("admin")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/?limit=10")
    missing = []
    for _ in range(60):  # the header, the tabs, the search, the filters and the first rows
        page.keyboard.press("Tab")
        where = page.evaluate(DESCRIBE_FOCUS)
        if where == "body":
            break
        if page.evaluate("() => !document.activeElement.matches(':focus')"):
            continue  # a date input's calendar button, inside the input: Chromium draws its own ring there
        ring = focus_ring(console)
        width_px = float(ring["width"].removesuffix("px") or 0)
        transparent = ring["color"] in ("transparent", "rgba(0, 0, 0, 0)")
        if ring["style"] in ("none", "hidden") or width_px < 2 or transparent:
            missing.append(f"{where}: {ring}")
    assert not missing, "focused without a visible outline:\n" + "\n".join(missing)
