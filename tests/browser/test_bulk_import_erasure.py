"""The console's bigger jobs in real Chromium: bulk archiving with its preview count, importing a
LangBot file (dry run, then for real) and erasing a speaker (count, type the id again, erase)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memconsole.memory import episodes
from memconsole.memory.audit import Actor
from memconsole.memory.models import AuditEntry, Episode, Profile, Scope

from .conftest import Console, Seeded, accept_dialogs, jobs_run_before_each_request, playwright_expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

expect = playwright_expect()


@pytest.fixture(autouse=True)
def jobs_done_on_the_next_request(one_request_at_a_time):
    """Imports and erasure are background jobs: here they run before the next request is served."""
    with jobs_run_before_each_request(one_request_at_a_time):
        yield


def langbot_file(folder: Path) -> Path:
    """A small LangBot LongTermMemory export: two episodes of one chat and its session profile."""
    document = {
        "version": 1,
        "exported_at": "2024-05-01T08:00:00Z",
        "scope_key": "old-bot:group_tea",
        "user_key": "old-bot:group_tea",
        "collection_id": "ltm_tea",
        "statuses": ["active"],
        "episodes": [
            {
                "id": "lb-1",
                "content": "Mei brews oolong tea every Sunday",
                "tags": "tea,habit",
                "importance": "3",
                "timestamp": "2024-04-01T09:30:00Z",
                "sender_id": "m1",
                "sender_name": "Mei",
                "status": "active",
            },
            {
                "id": "lb-2",
                "content": "Mei is learning to make matcha",
                "tags": ["tea"],
                "importance": 4,
                "timestamp": "2024-04-02T10:00:00Z",
                "sender_id": "m1",
                "sender_name": "Mei",
                "status": "active",
            },
        ],
        "count": 2,
        "profiles": [
            {
                "type": "session",
                "scope_key": "old-bot:group_tea",
                "profile": {"name": "Tea club", "traits": ["calm"], "preferences": [], "notes": ""},
            }
        ],
    }
    path = folder / "langbot-tea.json"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.browser
def test_it_previews_the_count_and_archives_the_selected_episodes_in_bulk(
    console: Console, seeded: Seeded, admin_user
) -> None:
    page = console.page
    dialogs = accept_dialogs(console)
    newest = list(reversed(seeded.episode_ids))
    already_archived, chosen = newest[1], [newest[0], newest[1], newest[2]]
    episodes.archive(seeded.keys, Actor.system("tests"), [already_archived])
    console.log_in("admin")
    console.goto(f"/scopes/{seeded.scope.pk}/episodes/?status=all&limit=10")

    selected = page.locator("#selected-count")
    expect(selected).to_have_text("No episodes selected")
    page.get_by_role("checkbox", name="Select all episodes on this page").check()
    expect(selected).to_have_text("10 episodes selected")
    page.get_by_role("checkbox", name="Select all episodes on this page").uncheck()
    expect(selected).to_have_text("No episodes selected")
    for episode_id in chosen:
        page.get_by_role("checkbox", name=f"Select episode {episode_id}").check()
    expect(selected).to_have_text("3 episodes selected")

    page.get_by_label("Bulk action").select_option("archive")
    page.get_by_role("button", name="Apply to selected").click()
    preview = page.locator("#bulk-result")
    expect(preview.get_by_role("heading", name="Bulk action")).to_be_visible()
    # Found by a keyboard user: the preview appeared above the list while the focus stayed below it.
    expect(preview.get_by_role("heading", name="Bulk action")).to_be_focused()
    expect(preview).to_contain_text("You selected 3 episodes; 2 will be archived.")  # one was archived already
    assert Episode.objects.filter(episode_id__in=chosen, status="archived").count() == 1  # a preview writes nothing

    preview.get_by_role("button", name="Confirm").click()
    expect(preview.get_by_role("status")).to_have_text("2 episodes archived.")
    for episode_id in chosen:  # the list reloads by itself (episodesChanged)
        expect(page.locator(f"#episode-{episode_id}").get_by_text("Archived", exact=True)).to_be_visible()
    expect(page.locator(f"#episode-{newest[3]}").get_by_text("Active", exact=True)).to_be_visible()
    expect(page.locator("#scope-counts")).to_contain_text("3 archived")
    assert set(Episode.objects.filter(status="archived").values_list("episode_id", flat=True)) == set(chosen)
    audited = AuditEntry.objects.filter(operation="archive", actor__icontains="admin", user_key=seeded.keys.user_key)
    assert audited.exists()
    assert dialogs == []  # the preview is the confirmation; no browser dialog on the way


@pytest.mark.browser
def test_it_imports_a_langbot_file_after_a_dry_run(
    console: Console, seeded: Seeded, admin_user, tmp_path: Path
) -> None:
    page = console.page
    upload = langbot_file(tmp_path)
    console.log_in("admin")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Import").click()
    expect(page.get_by_role("heading", name="Import memory", level=1)).to_be_visible()

    page.get_by_label("File", exact=True).set_input_files(str(upload))
    page.get_by_label("Format", exact=True).select_option("langbot")
    page.get_by_label("Bot UUID").fill("bot-a")
    page.get_by_label("Session name").fill("tea_room")
    expect(page.get_by_label(re.compile(r"^Dry run"))).to_be_checked()
    page.get_by_role("button", name="Upload and import").click()

    report = page.locator("#import-report")
    expect(report).to_contain_text("Dry run: nothing was written.")
    expect(report).to_contain_text("langbot-tea.json")
    expect(report.locator(".facts div").filter(has_text="Episodes")).to_contain_text("2")
    expect(report.locator(".facts div").filter(has_text=re.compile(r"^Profiles"))).to_contain_text("1")
    assert not Episode.objects.filter(source="import").exists()
    assert not Scope.objects.filter(session_name="tea_room").exists()

    # The import ran as a background job; its page showed the report. Back to the form for the real one.
    expect(page.get_by_role("heading", name="Import", level=1)).to_be_visible()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Import").click()
    page.get_by_label("File", exact=True).set_input_files(str(upload))
    page.get_by_label("Format", exact=True).select_option("langbot")
    page.get_by_label("Bot UUID").fill("bot-a")
    page.get_by_label("Session name").fill("tea_room")
    page.get_by_label(re.compile(r"^Dry run")).uncheck()
    page.get_by_role("button", name="Upload and import").click()
    expect(report.get_by_text("The file was imported.")).to_be_visible()
    expect(report.locator(".facts div").filter(has_text="Indexed for search")).to_contain_text("2")
    expect(report).to_contain_text("bot-a:tea_room")
    imported = Episode.objects.filter(source="import")
    assert set(imported.values_list("imported_episode_id", flat=True)) == {"lb-1", "lb-2"}
    assert Profile.objects.filter(scope_key="bot-a:tea_room", type="session").exists()
    entries = AuditEntry.objects.filter(operation="import", scope_key="bot-a:tea_room").order_by("id")
    assert [(entry.target_type, entry.summary) for entry in entries] == [
        ("scope", "imported a batch of 2 episodes (langbot); the import goes on"),  # the job writes in batches
        ("session_profile", "session profile imported (langbot)"),  # the profile audited too
        ("scope", "imported 2 episodes and 1 profiles (langbot)"),
    ]

    report.get_by_role("link", name="Open tea_room").click()
    expect(page.get_by_role("heading", name="tea_room", level=1)).to_be_visible()
    expect(page.get_by_text("Mei brews oolong tea every Sunday")).to_be_visible()
    expect(page.get_by_text("Mei is learning to make matcha")).to_be_visible()
    page.get_by_label("Search episodes").fill("learning to make matcha")
    page.get_by_role("button", name="Search", exact=True).click()  # imported episodes are indexed
    expect(page.locator("tr.episode-row").first).to_contain_text("matcha")


@pytest.mark.browser
def test_it_erases_a_speaker_after_counting_and_typing_the_id_again(
    console: Console, seeded: Seeded, admin_user
) -> None:
    page = console.page
    dialogs = accept_dialogs(console)
    bob = Episode.objects.filter(user_key=seeded.keys.user_key, sender_id="u2").count()
    assert bob > 0
    console.log_in("admin")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Erasure").click()
    expect(page.get_by_role("heading", name="Erase a person", level=1)).to_be_visible()

    page.get_by_label("Speaker ID").fill("u2")
    page.get_by_label("Bot UUID").fill("bot-a")
    page.get_by_role("button", name="Count what would be erased").click()
    counts = page.locator("#erasure")
    expect(counts.get_by_role("heading", name="What would be erased")).to_be_visible()
    expect(counts.locator(".facts div").filter(has_text=re.compile(r"^Episodes"))).to_contain_text(str(bob))
    expect(counts.get_by_text("Dry run: nothing has been erased yet.")).to_be_visible()
    assert Episode.objects.filter(sender_id="u2").count() == bob

    # A mistyped id is refused inline, and nothing is erased. Found by a console user: it asked
    # "Erase ... permanently?" first, and only then said the typed id was wrong.
    page.get_by_label("Type the speaker ID again to confirm").fill("u3")
    page.get_by_role("button", name="Erase permanently").click()
    expect(counts.get_by_text("This does not match the speaker ID.", exact=False)).to_be_visible()
    assert not dialogs
    assert Episode.objects.filter(sender_id="u2").count() == bob

    page.get_by_label("Type the speaker ID again to confirm").fill("u2")
    page.get_by_role("button", name="Erase permanently").click()
    expect(counts.get_by_role("heading", name="What was erased")).to_be_visible()
    assert dialogs == ["Erase speaker u2 permanently? This cannot be undone."]
    expect(counts.get_by_text("The speaker was erased.", exact=False)).to_be_visible()
    expect(counts.locator(".facts div").filter(has_text=re.compile(r"^Episodes"))).to_contain_text(str(bob))
    assert not Episode.objects.filter(sender_id="u2").exists()
    assert Episode.objects.filter(sender_id="u1").exists()  # only that speaker
    assert AuditEntry.objects.filter(operation="erase_subject").count() == 1

    console.goto(f"/scopes/{seeded.scope.pk}/episodes/?status=all&limit=50")
    expect(page.locator("tr.episode-row")).to_have_count(len(seeded.episode_ids) - bob)
    expect(page.locator("tr.episode-row").filter(has_text="Bob")).to_have_count(0)
    page.get_by_label("Search episodes").fill("Bob mentioned a topic")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.get_by_text(re.compile(r"\d+ results? for this search"))).to_be_visible()
    expect(page.locator("tr.episode-row").filter(has_text="Bob")).to_have_count(0)  # gone from the index too
