"""Screenshots of every screen, light and dark, at 1366 px (desktop) and 390 px (phone), into
tests/browser/screenshots/ (git-ignored output, named in the README) so anyone can look at the UI;
and the checks a glance at them would make: each screen answers, the theme applies, nothing makes
the page scroll sideways, and at 390 px no table, button or link lies past the screen's edge (a
table scrolling inside its box hides "Roll back" as surely as a page scrolling sideways)."""

from __future__ import annotations

import re

import pytest
from django.urls import NoReverseMatch, reverse

from memconsole.memory import health, profiles
from memconsole.memory.audit import Actor
from memconsole.memory.models import InjectionSnapshot

from .conftest import PHONE, SCREENSHOTS, Console, Seeded

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDE = {"width": 1366, "height": 900}
VIEWPORTS = {"desktop": WIDE, "phone": PHONE}

# What lies past the right edge at this width: elements that can be clicked or read, and boxes
# that scroll sideways inside the page (their content cut off until one scrolls them).
OFF_SCREEN = """(width) => {
  const out = [];
  for (const el of document.querySelectorAll("main button, main a, main input, main select, main textarea, main summary")) {
    const box = el.getBoundingClientRect();
    if (box.width && box.height && getComputedStyle(el).visibility !== "hidden" && box.right > width + 1) {
      out.push(el.outerHTML.slice(0, 90));
    }
  }
  for (const el of document.querySelectorAll(".table-wrap")) {
    if (!el.checkVisibility()) continue;  // folded away (a closed <details>): not on the screen
    if (el.scrollWidth > el.clientWidth + 1) out.push(`a table scrolls sideways: ${el.scrollWidth}px in ${el.clientWidth}px`);
  }
  return out;
}"""


def _url(name: str, *args: object, query: str = "") -> str | None:
    try:
        path = reverse(f"console:{name}", args=args)
    except NoReverseMatch:  # a screen another engineer has not built (yet): nothing to show
        return None
    return f"{path}?{query}" if query else path


def screens(seeded: Seeded, admin_id: int) -> dict[str, str]:
    """Every GET screen of the console, by name."""
    pk = seeded.scope.pk
    snapshot = InjectionSnapshot.objects.filter(scope_key=seeded.keys.scope_key).order_by("-id").first()
    candidates = {
        "overview": _url("overview"),
        "overview-derived": _url("overview", query="session_name=group_100&bot_uuid=bot-a&isolation=session"),
        "profiles": _url("profiles", pk),
        "profile-session": _url("profile_detail", pk, "session"),
        "profile-speaker": _url("profile_detail", pk, "speaker", query="sender=u1"),
        "episodes": _url("episodes", pk, query="status=all"),
        "episodes-filtered": _url("episodes", pk, query="tag=note&sort=importance&limit=10"),
        "search": _url("episodes", pk, query="q=trip+to+Beijing"),
        "episode": _url("episode_detail", pk, seeded.trip_id),
        "episode-edit": _url("episode_edit", pk, seeded.trip_id),
        "episode-add": _url("episode_add", pk),
        "injection": _url("injection", pk),
        "injection-detail": _url("injection_detail", pk, snapshot.snapshot_id) if snapshot else None,
        "insights": _url("insights", pk),
        "known-at": _url("known_at", pk),
        "bot-insights": _url("bot_insights", seeded.keys.bot_uuid),
        "audit": _url("audit", pk),
        "audit-all": _url("audit_all"),
        "export": _url("export", pk),
        "import": _url("import"),
        "erasure": _url("erasure"),
        "time-zone": _url("time_zone"),
        "diagnostics": _url("diagnostics", query=f"scope={pk}"),
        "tokens": _url("tokens"),
        "users": _url("users"),
        "user": _url("user_detail", admin_id),
        "password": reverse("password_change"),
    }
    return {name: path for name, path in candidates.items() if path}


def luminance(css_color: str) -> float:
    red, green, blue = (int(n) for n in re.findall(r"\d+", css_color)[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


def check(console: Console, name: str, width: int, scheme: str) -> list[str]:
    page = console.page
    problems = []
    background = luminance(page.evaluate("() => getComputedStyle(document.body).backgroundColor"))
    if (scheme == "dark" and background > 0.3) or (scheme == "light" and background < 0.7):
        problems.append(f"{name} ({scheme}): background luminance {background:.2f}")
    scroll_width = page.evaluate("() => document.documentElement.scrollWidth")
    if scroll_width > width + 1:
        problems.append(f"{name} ({scheme}): the page is {scroll_width}px wide on a {width}px screen")
    if width <= PHONE["width"]:
        problems += [f"{name} ({scheme}): off screen: {item}" for item in page.evaluate(OFF_SCREEN, width)]
    return problems


@pytest.mark.browser
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_it_takes_a_screenshot_of_every_screen(
    new_console, seeded: Seeded, admin_user, width: str, scheme: str
) -> None:
    profiles.update_profile(seeded.keys, Actor.system("tests"), "session", add_traits=["likes maps"])  # a diff to show
    profiles.update_profile(
        seeded.keys, Actor.system("tests"), "speaker", "u1", add_traits=["tea"]
    )  # a version to roll back
    health.run_health_check(Actor.system("tests"))
    viewport = VIEWPORTS[width]
    console = new_console(color_scheme=scheme, viewport=viewport)  # the system preference (toggle: test_flow)
    page = console.page
    problems: list[str] = []
    console.goto("/accounts/login/")
    console.screenshot(f"login-{width}-{scheme}")
    console.log_in("admin")
    for name, path in screens(seeded, admin_user.pk).items():
        response = console.goto(path)
        page.wait_for_load_state("load")
        if response is None or response.status >= 400:
            problems.append(f"{name}: {path} answered {response.status if response else 'nothing'}")
        problems += check(console, name, viewport["width"], scheme)
        console.screenshot(f"{name}-{width}-{scheme}")

    # States reached by acting: a row's open actions menu, the bulk preview of all that match.
    console.goto(screens(seeded, admin_user.pk)["episodes-filtered"])
    page.locator("details.row-menu > summary").first.click()
    problems += check(console, "row-menu", viewport["width"], scheme)
    console.screenshot(f"row-menu-{width}-{scheme}")
    page.get_by_label("Bulk action").select_option("archive")
    page.get_by_role("button", name=re.compile(r"that match…$")).click()
    page.locator("section.bulk-preview").wait_for()
    problems += check(console, "bulk-preview", viewport["width"], scheme)
    console.screenshot(f"bulk-preview-{width}-{scheme}")
    assert not problems, "\n".join(problems)


@pytest.mark.browser
@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_longest_language_still_fits(new_console, seeded: Seeded, admin_user, width: str) -> None:
    """Spanish has the longest words: the busiest pages must still fit."""
    viewport = VIEWPORTS[width]
    console = new_console(color_scheme="dark", viewport=viewport)
    page = console.page
    console.log_in("admin")
    page.get_by_label("Language").select_option("es")
    page.get_by_role("button", name="Change language").click()
    page.wait_for_function("() => document.documentElement.lang === 'es'")
    problems: list[str] = []
    all_screens = screens(seeded, admin_user.pk)
    for name in ("overview", "episodes", "episodes-filtered", "search", "profile-speaker", "audit-all", "diagnostics"):
        console.goto(all_screens[name])
        problems += check(console, name, viewport["width"], "dark")
        console.screenshot(f"{name}-{width}-dark-es")
    assert not problems, "\n".join(problems)
    assert SCREENSHOTS.is_dir()
