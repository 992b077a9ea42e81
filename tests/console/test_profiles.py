"""The Profiles tab: session and speaker profiles, edits within limits, history, diff, rollback."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from pytest_django.asserts import assertContains

from memconsole.memory.models import AuditEntry, Profile
from memconsole.memory.profiles import get_profile, update_profile
from tests.factories import profile

from .conftest import htmx

pytestmark = pytest.mark.django_db

PROFILE = {"name": "Alice", "traits": "curious\nkind", "preferences": "green tea", "notes": "Met at the conference."}


@pytest.fixture
def speaker_profile(light_scope, keys, system) -> Profile:
    profile(keys, "u1", name="Alice", traits=["curious"])
    return profile(keys, "u1", name="Alice", traits=["curious", "kind"], preferences=["tea"], notes="v2")


def test_it_lists_the_session_profile_and_speaker_profiles(viewer_client, url, light_scope, speaker_profile):
    response = viewer_client.get(url("profiles", light_scope.pk))
    page = response.content.decode()
    assertContains(response, "This session has no profile yet.")
    assertContains(response, f'href="{url("profile_detail", light_scope.pk, "speaker")}?sender=u1">Alice</a>')
    assert '<label for="speaker-picker">Speaker (name or ID)</label>' in page and '<option value="u5">' in page


def test_it_shows_an_empty_state_without_speaker_profiles(viewer_client, url, light_scope):
    response = viewer_client.get(url("profiles", light_scope.pk))
    assertContains(response, "No speaker has a profile in this session yet.")


def test_it_shows_a_profile_with_its_history_and_the_latest_diff(viewer_client, url, light_scope, speaker_profile):
    response = viewer_client.get(url("profile_detail", light_scope.pk, "speaker"), {"sender": "u1"})
    page = response.content.decode()
    assert "Speaker profile: Alice (u1)" in page and "Current version (2)" in page  # the name, then the id
    assertContains(response, "Changes from version 1 to version 2")
    assert re.search(r'<li class="diff-added">.*?Trait: kind</li>', page)
    assert re.search(r'<li class="diff-added">.*?Preference: tea</li>', page)
    assert "Edit profile" not in page and "Roll back" not in page  # a viewer reads only


def test_it_diffs_two_chosen_versions(viewer_client, url, light_scope, keys, system, speaker_profile):
    profile(keys, "u1", name="Alicia")
    response = viewer_client.get(
        url("profile_detail", light_scope.pk, "speaker"), {"sender": "u1", "diff_from": "1", "diff_to": "3"}
    )
    page = response.content.decode()
    assertContains(response, "Changes from version 1 to version 3")
    assert re.search(r'<li class="diff-removed">.*?Name: Alice</li>', page)
    assert re.search(r'<li class="diff-added">.*?Name: Alicia</li>', page)


@pytest.mark.parametrize(
    "query", [{"sender": "u1", "diff_from": "9"}, {"sender": "u1", "diff_from": "x"}, {"sender": "u1", "cursor": "q"}]
)
def test_it_answers_400_to_a_bad_version_choice(viewer_client, url, light_scope, speaker_profile, query):
    response = viewer_client.get(url("profile_detail", light_scope.pk, "speaker"), query)
    assert response.status_code == 400


def test_it_answers_404_to_an_unknown_profile_type(viewer_client, url, light_scope):
    assert viewer_client.get(url("profile_detail", light_scope.pk, "robot")).status_code == 404


def test_it_sends_a_speaker_profile_without_a_speaker_back_to_the_list(viewer_client, url, light_scope):
    response = viewer_client.get(url("profile_detail", light_scope.pk, "speaker"))
    assert response.status_code == 302 and response["Location"] == url("profiles", light_scope.pk)


def test_it_lets_an_operator_create_and_edit_a_profile_and_audits_it(operator_client, url, light_scope, keys):
    response = operator_client.post(url("profile_edit", light_scope.pk, "session"), PROFILE)
    assert response.status_code == 302 and response["Location"] == url("profile_detail", light_scope.pk, "session")
    data, row = get_profile(keys, "session")
    assert data == {
        "name": "Alice",
        "traits": ["curious", "kind"],
        "preferences": ["green tea"],
        "notes": "Met at the conference.",
    }
    assert row.version == 1
    entry = AuditEntry.objects.get(operation="profile_update")
    assert entry.actor == "user:operator" and entry.payload["after"]["name"] == "Alice"
    assertContains(operator_client.get(response["Location"]), "Profile saved as version 1.")


def test_saving_a_profile_unchanged_writes_no_version(operator_client, url, light_scope, keys):
    operator_client.post(url("profile_edit", light_scope.pk, "session"), PROFILE)

    response = operator_client.post(url("profile_edit", light_scope.pk, "session"), {**PROFILE, "version": "1"})

    assertContains(operator_client.get(response["Location"]), "Nothing changed: the profile is as it was (version 1).")
    assert get_profile(keys, "session")[1].version == 1
    assert AuditEntry.objects.filter(operation="profile_update").count() == 1


def test_it_answers_an_htmx_edit_with_the_profile_panel(operator_client, url, light_scope, keys, speaker_profile):
    response = operator_client.post(
        url("profile_edit", light_scope.pk, "speaker"), {**PROFILE, "sender_id": "u1"}, **htmx("profile-panel")
    )
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert html.lstrip().startswith('<div id="profile-panel"') and "Profile saved as version 3." in html
    assert get_profile(keys, "speaker", "u1")[1].version == 3


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({**PROFILE, "notes": "n" * 2001}, "notes"),
        ({**PROFILE, "name": "n" * 101}, "name"),
        ({**PROFILE, "traits": "\n".join(f"t{i}" for i in range(21))}, "traits"),
        ({**PROFILE, "preferences": "\n".join(f"p{i}" for i in range(11))}, "preferences"),
        ({**PROFILE, "traits": "x" * 201}, "traits"),
    ],
)
def test_it_answers_400_with_inline_errors_to_an_edit_beyond_the_limits(
    operator_client, url, light_scope, keys, data, field
):
    response = operator_client.post(url("profile_edit", light_scope.pk, "session"), data)
    assertContains(response, f'id="id_{field}_error"', status_code=400)
    assert get_profile(keys, "session")[1] is None


def test_it_answers_404_to_a_speaker_edit_without_a_speaker(operator_client, url, light_scope):
    assert operator_client.post(url("profile_edit", light_scope.pk, "speaker"), PROFILE).status_code == 404
    assert operator_client.post(url("profile_edit", light_scope.pk, "robot"), PROFILE).status_code == 404


def test_it_rolls_a_profile_back_and_audits_it(operator_client, url, light_scope, keys, speaker_profile):
    response = operator_client.post(
        url("profile_rollback", light_scope.pk, "speaker"), {"sender_id": "u1", "version": "1"}
    )
    assert response.status_code == 302 and response["Location"].endswith("?sender=u1")
    data, row = get_profile(keys, "speaker", "u1")
    assert row.version == 3 and data["traits"] == ["curious"] and data["preferences"] == []
    assert AuditEntry.objects.filter(operation="profile_rollback").count() == 1


def test_a_rollback_to_the_current_version_changes_nothing_and_says_so(
    operator_client, url, light_scope, keys, speaker_profile
):
    """A stale page or a crafted form: no identical new version, no audit entry."""
    current = get_profile(keys, "speaker", "u1")[1].version
    response = operator_client.post(
        url("profile_rollback", light_scope.pk, "speaker"),
        {"sender_id": "u1", "version": str(current)},
        **htmx("profile-panel"),
    )
    assert response.status_code == 200 and b"Nothing changed: version" in response.content
    assert get_profile(keys, "speaker", "u1")[1].version == current
    assert not AuditEntry.objects.filter(operation="profile_rollback").exists()


def test_it_answers_an_htmx_rollback_with_the_profile_panel(operator_client, url, light_scope, speaker_profile):
    response = operator_client.post(
        url("profile_rollback", light_scope.pk, "speaker"), {"sender_id": "u1", "version": "1"}, **htmx("profile-panel")
    )
    assert (
        response.status_code == 200
        and b"<html" not in response.content
        and b"Rolled back to version 1" in response.content
    )


def test_it_offers_rollback_with_a_confirmation_to_operators(operator_client, url, light_scope, speaker_profile):
    response = operator_client.get(url("profile_detail", light_scope.pk, "speaker"), {"sender": "u1"})
    assert response.status_code == 200
    page = response.content.decode()
    assert 'aria-label="Roll back to version 1"' in page and "hx-confirm=" in page
    assert 'aria-label="Roll back to version 2"' not in page  # the current version


@pytest.mark.parametrize(
    ("data", "status"),
    [
        ({"sender_id": "u1", "version": "9"}, 404),
        ({"sender_id": "u1", "version": "x"}, 400),
        ({"sender_id": "nobody", "version": "1"}, 404),
    ],
)
def test_it_refuses_a_rollback_to_a_missing_version(operator_client, url, light_scope, speaker_profile, data, status):
    assert operator_client.post(url("profile_rollback", light_scope.pk, "speaker"), data).status_code == status


def test_it_keeps_profiles_of_another_scope_apart(operator_client, url, light_scope, other_scope, other_keys, system):
    profile(other_keys, "u1", name="Zed")
    response = operator_client.get(url("profile_detail", light_scope.pk, "speaker"), {"sender": "u1"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "Zed" not in page and "There is no profile yet." in page
    response = operator_client.post(
        url("profile_rollback", light_scope.pk, "speaker"), {"sender_id": "u1", "version": "1"}
    )
    assert response.status_code == 404


def test_it_enforces_csrf_on_profile_edits(client_for, operator, url, light_scope, keys):
    client = client_for(operator, enforce_csrf_checks=True)
    assert client.post(url("profile_edit", light_scope.pk, "session"), PROFILE).status_code == 403
    assert get_profile(keys, "session")[1] is None


def test_it_shows_profile_content_as_text(viewer_client, url, light_scope, keys, system):
    profile(keys, name="<script>x()</script>", notes="<i>hi</i>")
    response = viewer_client.get(url("profile_detail", light_scope.pk, "session"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "<script>x()" not in page and "&lt;script&gt;x()&lt;/script&gt;" in page and "<i>hi</i>" not in page


@pytest.mark.parametrize("query", [{"diff_from": "9" * 20}, {"diff_to": "9" * 20}, {"diff_from": str(2**31)}])
def test_it_answers_400_to_a_version_number_beyond_any_version(viewer_client, url, light_scope, speaker_profile, query):
    response = viewer_client.get(url("profile_detail", light_scope.pk, "speaker"), {"sender": "u1", **query})
    assert response.status_code == 400


def test_it_answers_400_to_a_rollback_to_a_version_number_beyond_any_version(
    operator_client, url, light_scope, keys, speaker_profile
):
    response = operator_client.post(
        url("profile_rollback", light_scope.pk, "speaker"), {"sender_id": "u1", "version": "9" * 20}
    )
    assert response.status_code == 400
    assert get_profile(keys, "speaker", "u1")[1].version == 2


@pytest.mark.parametrize("action", ["profile_edit", "profile_rollback"])
def test_it_answers_400_to_a_posted_speaker_id_holding_a_nul(
    operator_client, url, light_scope, keys, speaker_profile, action
):
    data = {**PROFILE, "sender_id": "u1\x00", "version": "1"}
    response = operator_client.post(url(action, light_scope.pk, "speaker"), data)
    assert response.status_code == 400
    assert get_profile(keys, "speaker", "u1")[1].version == 2


@pytest.mark.parametrize("sender_id", ["user#1234", "a&diff_from=99", "ü 1?x=/"])
def test_it_redirects_to_the_speaker_profile_with_the_speaker_id_encoded(
    operator_client, url, light_scope, keys, sender_id
):
    response = operator_client.post(url("profile_edit", light_scope.pk, "speaker"), {**PROFILE, "sender_id": sender_id})
    assert response.status_code == 302
    assert response["Location"] == url(
        "profile_detail", light_scope.pk, "speaker", query=urlencode({"sender": sender_id})
    )
    page = operator_client.get(response["Location"])
    assert page.status_code == 200 and "Profile saved as version 1." in page.content.decode()
    assert get_profile(keys, "speaker", sender_id)[1].version == 1


def test_a_rollback_from_a_page_older_than_the_profile_is_a_conflict_and_undoes_nothing(
    operator_client, url, light_scope, keys, system, speaker_profile
):
    # a rollback from a stale page silently threw away a "SEVERE PEANUT ALLERGY" saved meanwhile
    page = operator_client.get(url("profile_detail", light_scope.pk, "speaker"), {"sender": "u1"}).content.decode()
    assert '<input type="hidden" name="current" value="2">' in page
    update_profile(keys, system, "speaker", "u1", add_preferences=["SEVERE PEANUT ALLERGY"])  # version 3
    form = {"sender_id": "u1", "version": "1", "current": "2"}
    response = operator_client.post(url("profile_rollback", light_scope.pk, "speaker"), form, **htmx())
    assert response.status_code == 409
    assert "Nothing was rolled back: someone saved version 3 after you opened this page." in response.content.decode()
    data, row = get_profile(keys, "speaker", "u1")
    assert row.version == 3 and "SEVERE PEANUT ALLERGY" in data["preferences"]
    assert not AuditEntry.objects.filter(operation="profile_rollback").exists()
    form["current"] = "3"  # read again: the rollback is meant
    assert operator_client.post(url("profile_rollback", light_scope.pk, "speaker"), form).status_code == 302
    assert get_profile(keys, "speaker", "u1")[1].version == 4


def test_notes_posted_without_javascript_count_each_line_break_once(operator_client, url, light_scope, keys):
    # 1,800 characters in the browser were refused as 2,400: each line break posted as "\r\n"
    notes = "\r\n".join(["ab"] * 600)
    form = {"sender_id": "u1", "version": "0", "name": "", "traits": "calm\r\nkind", "preferences": "", "notes": notes}
    response = operator_client.post(url("profile_edit", light_scope.pk, "speaker"), form)
    assert response.status_code == 302, response.content.decode()[:300]
    data = get_profile(keys, "speaker", "u1")[0]
    assert data["notes"] == "\n".join(["ab"] * 600) and data["traits"] == ["calm", "kind"]
