"""The console in real Chromium: every step a user takes, found by accessible names (issue 3)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.utils import translation

from memconsole.memory.models import AuditEntry, Episode, Profile, Scope

from .conftest import XSS, Console, Seeded, jobs_run_before_each_request, playwright_expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

expect = playwright_expect()


class Dialogs:
    """Answers every window.confirm (htmx's hx-confirm) and keeps its message."""

    def __init__(self, console: Console) -> None:
        self.messages: list[str] = []
        self.accept = True
        console.page.on("dialog", self._answer)

    def wait_for(self, count: int, page) -> None:
        for _ in range(100):
            if len(self.messages) >= count:
                return
            page.wait_for_timeout(50)
        raise AssertionError(f"expected {count} confirmation dialogs, saw {self.messages}")

    def _answer(self, dialog) -> None:
        self.messages.append(dialog.message)
        if self.accept:
            dialog.accept()
        else:
            dialog.dismiss()


def episodes_path(seeded: Seeded) -> str:
    return f"/scopes/{seeded.scope.pk}/episodes/"


def row_ids(console: Console) -> list[str]:
    return [
        row_id.removeprefix("episode-")
        for row_id in console.page.locator("tr.episode-row").evaluate_all("rows => rows.map(r => r.id)")
    ]


@pytest.mark.browser
def test_it_logs_in_finds_a_scope_derives_one_and_logs_out(console: Console, seeded: Seeded, admin_user) -> None:
    page = console.page
    console.goto(episodes_path(seeded))
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next="))

    console.log_in("admin")
    expect(page.get_by_role("heading", name="Memory spaces", exact=True)).to_be_visible()

    page.get_by_label("Find a scope").fill("group_100")
    page.get_by_label("Find a scope").press("Enter")
    scope_list = page.locator("#scope-list")
    expect(scope_list.get_by_role("link", name="group_100")).to_be_visible()
    expect(scope_list.get_by_role("link", name="group_200")).to_have_count(0)
    expect(page).to_have_url(re.compile(r"q=group_100"))

    page.get_by_label("Find a scope").fill("no-such-space")
    page.get_by_label("Find a scope").press("Enter")
    expect(scope_list).to_contain_text("No memory space matches")

    page.get_by_label("Bot UUID").fill("bot-a")
    page.get_by_label("Session name").fill("person_42")
    page.get_by_label("Isolation").select_option("session")
    page.get_by_role("button", name="Derive", exact=True).click()
    derived = page.locator("#derive-result")
    expect(derived.get_by_text("bot-a:person_42", exact=True).first).to_be_visible()

    page.get_by_label("Isolation").select_option("bot")
    page.get_by_role("button", name="Derive", exact=True).click()
    expect(derived.get_by_text("bot:bot-a", exact=True)).to_be_visible()
    page.get_by_role("button", name="Open this memory space").click()
    expect(page.get_by_role("heading", name="person_42", level=1)).to_be_visible()
    # Nothing is stored there: no empty space row is created (issue 17); it offers the first episode.
    expect(page.get_by_role("heading", name="Nothing is stored in this memory space yet")).to_be_visible()
    assert not Scope.objects.filter(scope_key="bot-a:person_42", isolation="bot").exists()
    assert not AuditEntry.objects.filter(operation="scope_open", scope_key="bot-a:person_42").exists()

    # Deriving the space of an existing scope links straight to it.
    console.goto("/")
    page.get_by_label("Bot UUID").fill("bot-a")
    page.get_by_label("Session name").fill("group_100")
    page.get_by_role("button", name="Derive", exact=True).click()
    page.locator("#derive-result").get_by_role("link", name="Open this memory space").click()
    expect(page.get_by_role("heading", name="group_100", level=1)).to_be_visible()

    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("button", name="Log in", exact=True)).to_be_visible()
    console.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))


@pytest.mark.browser
def test_it_pages_searches_archives_restores_and_deletes_episodes(console: Console, seeded: Seeded, admin_user) -> None:
    page = console.page
    dialogs = Dialogs(console)
    console.log_in("admin")
    console.goto(episodes_path(seeded))

    # The speaker picker fills itself the first time it is focused, and the address stays.
    expect(page.locator("#speaker-list option")).to_have_count(0)
    page.get_by_label("Speaker", exact=True).focus()
    expect(page.locator("#speaker-list option")).to_have_count(2)
    expect(page.locator('#speaker-list option[value="u1"]')).to_have_text(
        "Alice (u1)"
    )  # name (id), as the picker shows (H6)
    expect(page).to_have_url(re.compile(rf"{episodes_path(seeded)}$"))

    page.get_by_label("Per page").select_option("10")
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"limit=10"))
    newest_first = list(reversed(seeded.episode_ids))
    expect(page.locator("tr.episode-row")).to_have_count(10)
    first_page = row_ids(console)
    assert first_page == newest_first[:10]

    page.get_by_role("link", name="Next", exact=True).click()
    expect(page).to_have_url(re.compile(r"cursor="))
    expect(page.locator(f"#episode-{newest_first[10]}")).to_be_visible()
    assert row_ids(console) == newest_first[10:20]
    page.get_by_role("link", name="Next", exact=True).click()
    expect(page.locator(f"#episode-{newest_first[20]}")).to_be_visible()
    assert row_ids(console) == newest_first[20:]
    expect(page.get_by_role("link", name="Next", exact=True)).to_have_count(0)
    page.get_by_role("link", name="Previous", exact=True).click()
    expect(page.locator(f"#episode-{newest_first[10]}")).to_be_visible()
    assert row_ids(console) == newest_first[10:20]
    page.get_by_role("link", name="Previous", exact=True).click()
    expect(page.locator(f"#episode-{newest_first[0]}")).to_be_visible()
    assert row_ids(console) == first_page
    page.reload()  # the pushed URL is a real page
    assert row_ids(console) == first_page

    # Semantic search with the score and its breakdown.
    page.get_by_label("Search episodes").fill("travelling to China soon")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.get_by_text(re.compile(r"\d+ results? for this search"))).to_be_visible()
    top = page.locator("tr.episode-row").first
    expect(top).to_have_id(f"episode-{seeded.trip_id}")
    expect(top).to_contain_text("trip to Beijing")
    expect(top.get_by_text(re.compile(r"Score 0\.\d{3}"))).to_be_visible()
    breakdown = top.get_by_label("Score breakdown")
    for factor in ("similarity", "recency", "importance", "speaker", "update", "exact"):
        expect(breakdown.get_by_text(factor, exact=True)).to_be_visible()
    expect(breakdown).to_contain_text("×1.16")  # importance 4

    # Archive from the search results (the row's actions menu): the row updates in place, no dialog.
    row = page.locator(f"#episode-{seeded.trip_id}")
    asked = len(dialogs.messages)
    row.locator("details.row-menu > summary").click()
    row.get_by_role("button", name="Archive", exact=True).click()
    expect(row.get_by_text("Archived", exact=True)).to_be_visible()
    expect(row.get_by_role("status")).to_have_text(f"Episode {seeded.trip_id} is archived.")
    assert len(dialogs.messages) == asked  # an Undo instead of a confirmation
    expect(row.get_by_role("button", name=f"Undo: restore episode {seeded.trip_id}")).to_be_visible()
    expect(page.locator("#scope-counts")).to_contain_text("1 archived")

    page.get_by_role("link", name="Clear the search").click()
    expect(page).not_to_have_url(re.compile(r"[?&]q="))
    expect(page.get_by_label("Search episodes")).to_have_value("")
    expect(page.locator(f"#episode-{seeded.trip_id}")).to_have_count(0)  # active episodes only
    page.get_by_label("Status").select_option("archived")
    page.get_by_role("button", name="Apply filters").click()
    row = page.locator(f"#episode-{seeded.trip_id}")
    expect(row).to_be_visible()
    expect(page.locator("tr.episode-row")).to_have_count(1)
    row.locator("details.row-menu > summary").click()
    row.get_by_role("button", name="Restore", exact=True).click()
    expect(row.get_by_text("Active", exact=True)).to_be_visible()
    expect(row.get_by_role("button", name="Archive", exact=True, include_hidden=True)).to_have_count(1)
    assert Episode.objects.get(episode_id=seeded.trip_id).status == "active"

    # Delete asks first; dismissing keeps the episode.
    victim = newest_first[2]
    page.get_by_label("Status").select_option("all")
    page.get_by_role("button", name="Apply filters").click()
    row = page.locator(f"#episode-{victim}")
    dialogs.accept = False
    asked = len(dialogs.messages)
    row.locator("details.row-menu > summary").click()
    row.get_by_role("button", name="Delete…", exact=True).click()
    dialogs.wait_for(asked + 1, page)
    expect(row.get_by_role("button", name="Delete…", exact=True)).to_be_visible()
    assert dialogs.messages[-1] == (
        f"Delete episode {victim}? The episode and its search vector are removed. The audit log keeps "
        "a copy of its content (its before-image) unless the person is erased."
    )
    assert Episode.objects.filter(episode_id=victim).exists()

    dialogs.accept = True
    row.get_by_role("button", name="Delete…", exact=True).click()
    expect(row).to_have_text(f"Episode {victim} was deleted.")
    assert not Episode.objects.filter(episode_id=victim).exists()

    # The audit tab lists what was done, newest first, with before and after.
    page.get_by_role("link", name="Audit", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/scopes/{seeded.scope.pk}/audit/$"))
    table = page.get_by_role("table", name="Audit entries, newest first")
    cells = table.locator("tbody tr td:nth-child(3) > code")  # the operation's code, beside its name
    expect(cells.first).to_have_text("delete")
    operations = cells.all_inner_texts()
    assert operations[:4] == ["delete", "restore", "archive", "inject"]
    expect(table.locator("tbody tr").first).to_contain_text(victim)
    table.locator("tbody tr").first.get_by_text("Before and after").click()
    expect(table.locator("tbody tr").first.locator("pre").first).to_contain_text("Note")
    page.get_by_label("Operation").fill("archive")
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"operation=archive"))
    expect(cells).to_have_text(["archive"])


@pytest.mark.browser
def test_it_edits_a_profile_and_rolls_it_back(console: Console, seeded: Seeded, admin_user) -> None:
    page = console.page
    dialogs = Dialogs(console)
    console.log_in("admin")
    console.goto(episodes_path(seeded))
    page.get_by_role("link", name="Profiles", exact=True).click()
    expect(page.get_by_role("heading", name="Session profile")).to_be_visible()
    expect(page.get_by_text("Travel club")).to_be_visible()
    page.get_by_role("link", name="Open and edit the session profile").click()

    page.get_by_label("Name", exact=True).fill("Hiking club")
    page.get_by_label("Traits (one per line)").fill("friendly\noutdoorsy")
    page.get_by_role("button", name="Save profile").click()
    panel = page.locator("#profile-panel")
    expect(panel.get_by_role("status")).to_have_text("Profile saved as version 2.")
    expect(panel.get_by_role("heading", name="Current version (2)")).to_be_visible()
    expect(panel.locator(".profile-summary").first).to_contain_text("Hiking club")
    expect(panel.locator(".diff")).to_contain_text("Hiking club")

    panel.get_by_role("button", name="Roll back to version 1").click()
    expect(panel.get_by_role("status")).to_have_text("Rolled back to version 1 (saved as version 3).")
    expect(panel.locator(".profile-summary").first).to_contain_text("Travel club")
    expect(panel.locator(".profile-summary").first).not_to_contain_text("outdoorsy")
    assert "version 1" in dialogs.messages[-1]
    assert Profile.objects.get(scope_key=seeded.keys.scope_key, type="session").version == 3

    # Bad input is answered inline, without losing what was typed.
    page.get_by_label("Traits (one per line)").fill("\n".join(f"trait {n}" for n in range(25)))
    page.get_by_role("button", name="Save profile").click()
    expect(panel.get_by_text(re.compile(r"at most 20 entries"))).to_be_visible()
    expect(page.get_by_label("Traits (one per line)")).to_have_value(re.compile(r"trait 24$"))

    page.get_by_role("link", name="Audit", exact=True).click()
    cells = page.locator("table.audit tbody tr td:nth-child(3) > code")  # the operation's code, beside its name
    expect(cells.first).to_have_text("profile_rollback")
    operations = cells.all_inner_texts()
    assert operations[:2] == ["profile_rollback", "profile_update"]


@pytest.mark.browser
def test_it_shows_the_injection_history_and_downloads_the_export(
    console: Console, seeded: Seeded, admin_user, tmp_path: Path
) -> None:
    page = console.page
    console.log_in("admin")
    console.goto(episodes_path(seeded))
    page.get_by_role("link", name="Injection", exact=True).click()
    expect(page.get_by_role("heading", name="Latest injection")).to_be_visible()
    history = page.get_by_role("table", name="Injection snapshots, newest first")
    expect(history.locator("tbody tr")).to_have_count(2)
    expect(page.locator("pre.system-block").first).to_contain_text("Travel club")
    history.locator("tbody tr").nth(1).get_by_role("link").click()
    expect(page.get_by_role("heading", name="Injection snapshot")).to_be_visible()
    expect(page.get_by_text("when is the trip to Beijing?")).to_be_visible()
    expect(page.get_by_role("link", name=seeded.trip_id).first).to_be_visible()

    page.get_by_role("link", name="Export", exact=True).click()
    expect(page.get_by_role("checkbox", name="Active")).to_be_checked()
    page.get_by_label("Include the audit log").check()
    with page.expect_download() as info:
        page.get_by_role("button", name="Download JSON").click()
    download = info.value
    assert download.suggested_filename.endswith(".json")
    target = tmp_path / download.suggested_filename
    download.save_as(target)
    document = json.loads(target.read_text(encoding="utf-8"))
    assert document["scope"]["scope_key"] == seeded.keys.scope_key
    episodes = document["episodes"]
    assert episodes["version"] == 1 and episodes["count"] == len(seeded.episode_ids)
    assert {e["id"] for e in episodes["episodes"]} == set(seeded.episode_ids)
    assert any(XSS in e["content"] for e in episodes["episodes"])
    assert {p["type"] for p in document["profiles"]["profiles"]} == {"session", "speaker"}
    assert document["audit"]["entries"][-1]["operation"] == "export"
    assert AuditEntry.objects.filter(operation="export", scope_key=seeded.keys.scope_key).count() == 1


@pytest.mark.browser
def test_it_runs_the_health_check(console: Console, seeded: Seeded, admin_user, one_request_at_a_time) -> None:
    page = console.page
    console.log_in("admin")
    console.goto(episodes_path(seeded))
    page.get_by_role("link", name="Diagnostics", exact=True).click()
    expect(page.get_by_role("heading", name="Diagnostics", level=1)).to_be_visible()
    expect(page.get_by_text("The health check has not run yet")).to_be_visible()
    diagnostics = page.url
    with jobs_run_before_each_request(one_request_at_a_time):  # the health run is a job (issue 21)
        page.get_by_role("button", name="Run health check").click()
        page.wait_for_url(re.compile(r"/jobs/"))
        page.reload()  # the next request runs the queued job; its page then shows it finished
        page.goto(diagnostics)
    health = page.locator("#health")
    expect(health.get_by_role("heading", name=re.compile(r"^Latest result"))).to_be_visible(timeout=60_000)
    for check in ("database", "vector_index", "embedding", "audit_chain"):
        expect(health.locator(".health-cards").get_by_role("heading", name=re.compile(rf"^{check}\b"))).to_be_visible()
    expect(health.locator(".health-cards .card")).not_to_have_count(0)
    expect(health.get_by_role("heading", name="History")).to_be_visible()
    expect(page.get_by_role("link", name="Back to group_100")).to_be_visible()


@pytest.mark.browser
def test_it_switches_to_chinese_and_to_the_dark_theme(new_console, seeded: Seeded, admin_user) -> None:
    console = new_console(color_scheme="light", timezone_id="Asia/Shanghai")
    page = console.page
    console.log_in("admin")
    console.goto(episodes_path(seeded))
    html = page.locator("html")

    toggle = page.get_by_role("button", name="Dark theme")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    light_background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    toggle.click()
    expect(html).to_have_attribute("data-theme", "dark")
    expect(toggle).to_have_attribute("aria-pressed", "true")
    dark_background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert dark_background != light_background

    page.get_by_label("Language").select_option("zh-hans")
    page.get_by_role("button", name="Change language").click()
    expect(html).to_have_attribute("lang", "zh-hans")
    expect(html).to_have_attribute("data-theme", "dark")  # remembered across pages
    with translation.override("zh-hans"):
        names = {
            word: translation.gettext(word)
            for word in ("Profiles", "Episodes", "Injection", "Audit", "Export", "Log out", "Search")
        }
    assert all(re.search(r"[\u4e00-\u9fff]", name) for name in names.values()), names
    tabs = page.get_by_role("navigation", name=re.compile(".+")).filter(
        has=page.get_by_role("link", name=names["Audit"])
    )
    for word in ("Profiles", "Episodes", "Injection", "Audit", "Export"):
        expect(tabs.get_by_role("link", name=names[word], exact=True)).to_be_visible()
    expect(page.get_by_role("button", name=names["Search"], exact=True)).to_be_visible()
    console.screenshot("episodes-desktop-dark-zh")

    # Times read in the browser's zone (UTC+8 here), the UTC value on hover.
    stamp = page.locator("tr.episode-row time[datetime]").first
    utc = datetime.strptime(stamp.get_attribute("title"), "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC)
    expect(stamp).to_contain_text((utc + timedelta(hours=8)).strftime("%H:%M:%S"))
    console.goto(f"/scopes/{seeded.scope.pk}/audit/")  # the choice is remembered on the next page
    expect(html).to_have_attribute("lang", "zh-hans")
    expect(page.get_by_role("button", name=names["Log out"])).to_be_visible()

    page.get_by_role("button", name=names["Log out"]).click()
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    expect(html).to_have_attribute("lang", "zh-hans")
    expect(html).to_have_attribute("data-theme", "dark")


@pytest.mark.browser
def test_it_shows_html_in_episodes_as_text_and_never_runs_it(console: Console, seeded: Seeded, admin_user) -> None:
    page = console.page
    console.log_in("admin")
    pages = {
        "episodes": episodes_path(seeded) + "?status=all&limit=50",
        "search": episodes_path(seeded) + "?q=markup+Alice+pasted",
        "detail": f"/scopes/{seeded.scope.pk}/episodes/{seeded.xss_id}/",
        "injection": f"/scopes/{seeded.scope.pk}/injection/",
        "audit": f"/scopes/{seeded.scope.pk}/audit/?operation=remember",
    }
    for name, path in pages.items():
        console.goto(path)
        page.wait_for_load_state("load")
        shown = page.get_by_text(XSS, exact=False)
        if name == "audit":
            entry = page.locator("table.audit tbody tr").filter(has_text="Alice pasted this markup")
            entry.get_by_text("Before and after").click()
            shown = entry.locator("pre").filter(has_text=XSS)
        expect(shown.first).to_be_visible()
        assert page.locator("img[src='x']").count() == 0, name
        assert not console.xss_fired(), f"markup in an episode ran on the {name} page"
