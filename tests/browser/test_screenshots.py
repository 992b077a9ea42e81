"""Screenshots of every screen, light and dark, at desktop and phone width, into
tests/browser/screenshots/ (kept out of git) so anyone can look at the UI; and the checks a glance
at them would make: the theme applies and nothing makes the page scroll sideways."""

from __future__ import annotations

import re

import pytest

from memconsole.memory import health, profiles
from memconsole.memory.audit import Actor

from .conftest import DESKTOP, PHONE, Seeded

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def screens(seeded: Seeded) -> dict[str, str]:
    scope = f"/scopes/{seeded.scope.pk}"
    return {
        "overview": "/?session_name=group_100&bot_uuid=bot-a&isolation=session",
        "profiles": f"{scope}/profiles/",
        "profile": f"{scope}/profiles/session/",
        "episodes": f"{scope}/episodes/?status=all",
        "search": f"{scope}/episodes/?q=trip+to+Beijing",
        "episode": f"{scope}/episodes/{seeded.trip_id}/",
        "injection": f"{scope}/injection/",
        "audit": f"{scope}/audit/",
        "export": f"{scope}/export/",
        "diagnostics": f"/diagnostics/?scope={seeded.scope.pk}",
    }


def luminance(css_color: str) -> float:
    red, green, blue = (int(n) for n in re.findall(r"\d+", css_color)[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


@pytest.mark.browser
@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_it_takes_a_screenshot_of_every_screen(new_console, seeded: Seeded, admin_user, width: str) -> None:
    profiles.update_profile(seeded.keys, Actor.system("tests"), "session", add_traits=["likes maps"])  # a diff to show
    health.run_health_check(Actor.system("tests"))
    viewport = DESKTOP if width == "desktop" else PHONE
    problems = []
    for scheme in ("light", "dark"):  # the system preference; the toggle is tested in test_flow
        console = new_console(color_scheme=scheme, viewport=viewport)
        page = console.page
        console.goto("/accounts/login/")
        console.screenshot(f"login-{width}-{scheme}")
        console.log_in("admin")
        for name, path in screens(seeded).items():
            console.goto(path)
            page.wait_for_load_state("load")
            background = luminance(page.evaluate("() => getComputedStyle(document.body).backgroundColor"))
            if (scheme == "dark" and background > 0.3) or (scheme == "light" and background < 0.7):
                problems.append(f"{name} ({scheme}): background luminance {background:.2f}")
            scroll_width = page.evaluate("() => document.documentElement.scrollWidth")
            if scroll_width > viewport["width"] + 1:
                problems.append(
                    f"{name} ({scheme}): the page is {scroll_width}px wide on a {viewport['width']}px screen"
                )
            console.screenshot(f"{name}-{width}-{scheme}")
    # Spanish has the longest words: the pages must still fit.
    page.get_by_role("button", name="Change language").wait_for()
    page.get_by_label("Language").select_option("es")
    page.get_by_role("button", name="Change language").click()
    page.wait_for_function("() => document.documentElement.lang === 'es'")
    for name in ("episodes", "search", "diagnostics"):
        console.goto(screens(seeded)[name])
        scroll_width = page.evaluate("() => document.documentElement.scrollWidth")
        if scroll_width > viewport["width"] + 1:
            problems.append(f"{name} (es): the page is {scroll_width}px wide on a {viewport['width']}px screen")
        console.screenshot(f"{name}-{width}-dark-es")
    assert not problems, "\n".join(problems)
