"""Editing memory by hand, finding people by name, one row per memory space and times in one zone,
in Chromium (issue 17, H6)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from memconsole.memory import editing, episodes
from memconsole.memory.audit import Actor
from memconsole.memory.models import AuditEntry, Episode, Scope
from memconsole.memory.scopes import derive_scope, register_scope

from .conftest import Console, Seeded, playwright_expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

expect = playwright_expect()


@pytest.mark.browser
def test_it_edits_an_episode_resolves_a_conflict_and_reassigns_its_speaker(
    console: Console, seeded: Seeded, operator
) -> None:
    page = console.page
    console.log_in("operator")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/{seeded.trip_id}/")
    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page.get_by_role("heading", name=re.compile(r"Edit episode .* \(version 0\)"))).to_be_visible()
    page.get_by_label("Content").fill("I am planning a trip to Shanghai next month")
    page.get_by_label("Importance").select_option("4")
    # Meanwhile someone else edits the same episode.
    editing.edit_episode(seeded.keys, Actor.system("other"), seeded.trip_id, tags=["travel", "plans"])
    page.get_by_role("button", name="Save episode").click()
    conflict = page.locator("#episode-conflict")
    expect(conflict).to_contain_text("someone else changed this episode")
    expect(conflict).to_contain_text("Tags: travel, plans")
    expect(page.get_by_label("Content")).to_have_value("I am planning a trip to Shanghai next month")
    expect(page.get_by_label("Tags")).to_have_value("travel, plans")  # their change, kept where I changed nothing
    console.screenshot("episode-edit-conflict")
    page.get_by_role("button", name="Save my edit again").click()
    expect(page.get_by_text("saved (version 2)")).to_be_visible()
    expect(page.locator(".content-block")).to_have_text("I am planning a trip to Shanghai next month")
    trip = Episode.objects.get(episode_id=seeded.trip_id)
    assert (trip.importance, trip.tags, trip.version) == (4, ["travel", "plans"], 2)

    # "This is about Bob, not Alice": one action, by name.
    page.get_by_label("This memory is about").fill("bob")
    page.get_by_role("button", name="Reassign speaker").click()
    expect(page.get_by_text(re.compile(r"is now about Bob \(u2\)"))).to_be_visible()
    trip.refresh_from_db()
    assert (trip.sender_id, trip.sender_name) == ("u2", "Bob")
    assert AuditEntry.objects.filter(operation="episode_reassign", target_id=seeded.trip_id).count() == 1
    console.screenshot("episode-detail-edited")


@pytest.mark.browser
def test_it_adds_an_episode_by_hand(console: Console, seeded: Seeded, operator) -> None:
    page = console.page
    console.log_in("operator")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/new/")
    page.get_by_label("Content").fill("Carol is allergic to peanuts")
    page.get_by_label("Tags").fill("health")
    page.get_by_label("Speaker ID").fill("Alice")
    page.get_by_role("button", name="Add episode").click()
    expect(page.get_by_text(re.compile(r"Episode [0-9a-f]{12} added\."))).to_be_visible()
    added = Episode.objects.get(source="console")
    assert (added.sender_id, added.tags) == ("u1", ["health"])


@pytest.mark.browser
def test_it_opens_a_speaker_profile_by_name(console: Console, seeded: Seeded, viewer) -> None:
    page = console.page
    console.log_in("viewer")
    console.goto(f"/scopes/{seeded.scope.pk}/profiles/")
    page.get_by_label("Speaker (name or ID)").fill("alice")
    page.get_by_role("button", name="Open speaker profile").click()
    expect(page).to_have_url(re.compile(r"sender=u1"))
    expect(page.get_by_role("heading", name=re.compile(r"Speaker profile: .*\(u1\)"))).to_be_visible()


@pytest.mark.browser
def test_it_lists_a_shared_memory_once_and_opens_a_space_without_an_empty_row(
    console: Console, seeded: Seeded, admin_user, system
) -> None:
    page = console.page
    for n in range(4):
        register_scope(derive_scope("bot-s", f"group_{n}", "bot"))
    for text in ("The office moved to Lyon", "Lunch is at noon", "The printer is on floor 2"):
        episodes.remember(derive_scope("bot-s", "group_0", "bot"), system, text)
    empty = register_scope(derive_scope("bot-e", "group_1"))
    console.log_in("admin")
    scope_list = page.locator("#scope-list")
    expect(scope_list.get_by_role("link", name="Shared memory of 4 chats")).to_be_visible()
    expect(scope_list.get_by_text("3 active, 0 archived, 0 superseded", exact=True)).to_have_count(1)
    console.screenshot("overview-shared-memory")

    page.get_by_label("Find a scope").fill("Alice")  # by speaker name
    page.get_by_label("Find a scope").press("Enter")
    expect(scope_list.get_by_role("link", name="group_100")).to_be_visible()
    expect(scope_list.get_by_role("link", name="Shared memory of 4 chats")).to_have_count(0)

    console.goto("/")
    page.get_by_label("Bot UUID").fill("bot-n")
    page.get_by_label("Session name").fill("person_9")
    page.get_by_role("button", name="Derive", exact=True).click()
    page.get_by_role("button", name="Open this memory space").click()
    expect(page.get_by_role("heading", name="Nothing is stored in this memory space yet")).to_be_visible()
    assert not Scope.objects.filter(bot_uuid="bot-n").exists()
    page.get_by_label("Content").fill("First memory of person_9")
    page.get_by_role("button", name="Add the first episode").click()
    expect(page.get_by_role("heading", name="person_9", level=1)).to_be_visible()
    assert Scope.objects.filter(bot_uuid="bot-n").count() == 1

    console.goto("/?q=bot-e")
    page.get_by_role("button", name="Remove empty space").click()
    expect(page.get_by_text("The empty memory space group_1 was removed.")).to_be_visible()
    assert not Scope.objects.filter(pk=empty.pk).exists()


@pytest.mark.browser
def test_it_shows_times_and_reads_filters_in_the_chosen_zone(new_console, seeded: Seeded, viewer) -> None:
    console = new_console(timezone_id="Asia/Shanghai")
    page = console.page
    console.log_in("viewer")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/{seeded.trip_id}/")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/{seeded.trip_id}/")  # the browser's zone is known now
    html = page.locator("html")
    expect(html).to_have_attribute("data-time-zone", "browser")
    stamp = page.locator(".facts time[datetime]").first
    utc = datetime.strptime(stamp.get_attribute("title"), "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC)
    expect(stamp).to_contain_text(utc.astimezone(ZoneInfo("Asia/Shanghai")).strftime("%H:%M:%S CST"))

    page.get_by_role("link", name=re.compile("Time zone")).click()
    page.get_by_label("Time zone").fill("Europe/Paris")
    page.get_by_role("button", name="Use this time zone").click()
    expect(html).to_have_attribute("data-time-zone", "chosen")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/")
    expect(page.get_by_text("From (Europe/Paris)")).to_be_attached()
    console.screenshot("episodes-time-zone-paris")
