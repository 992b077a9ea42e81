"""Issue 14 in the console. No lost profile updates: the edit form always sends the version it
rendered; a save over a newer version is refused with 409, shows the other change as a diff and
keeps the admin's edit to re-apply. And the Episodes tab's time filter includes its end."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from memconsole.memory.models import ProfileVersion
from memconsole.memory.profiles import get_profile
from tests.factories import plain_episodes, profile

from .conftest import htmx

pytestmark = pytest.mark.django_db

EDIT = {"sender_id": "u1", "name": "Alice", "traits": "curious\npatient", "preferences": "", "notes": "mine"}


@pytest.fixture
def alice(light_scope, keys):
    return profile(keys, "u1", name="Alice", traits=["curious"])


def _version_field(page: str) -> str:
    match = re.search(r'<input type="hidden" name="version" value="(\d+)"', page)
    assert match, "the edit form carries the version it was rendered from"
    return match.group(1)


def test_it_renders_the_version_in_the_edit_form(operator_client, url, light_scope, alice):
    page = operator_client.get(url("profile_detail", light_scope.pk, "speaker"), {"sender": "u1"}).content.decode()
    assert _version_field(page) == "1"
    empty = operator_client.get(url("profile_detail", light_scope.pk, "session")).content.decode()
    assert _version_field(empty) == "0"


def test_it_saves_an_edit_made_on_the_current_version(operator_client, url, light_scope, keys, alice):
    response = operator_client.post(url("profile_edit", light_scope.pk, "speaker"), {**EDIT, "version": "1"})
    assert response.status_code == 302
    assert get_profile(keys, "speaker", "u1")[1].version == 2


def test_it_refuses_an_edit_of_a_stale_version_and_shows_the_other_change(
    operator_client, url, light_scope, keys, alice
):
    profile(keys, "u1", name="Alice", traits=["curious", "night owl"])  # another tab saved version 2
    versions = ProfileVersion.objects.count()

    response = operator_client.post(url("profile_edit", light_scope.pk, "speaker"), {**EDIT, "version": "1"})

    assert response.status_code == 409
    page = response.content.decode()
    assert ProfileVersion.objects.count() == versions
    assert get_profile(keys, "speaker", "u1")[0]["traits"] == ["curious", "night owl"]
    assert "Nothing was saved: someone else saved this profile while you were editing it." in page
    assert "Their changes from version 1 to version 2:" in page
    assert re.search(r'<li class="diff-added">.*?Trait: night owl</li>', page)
    # the admin's edit stays in the form, now based on version 2: saving again re-applies it
    assert _version_field(page) == "2"
    assert "curious\npatient</textarea>" in page and "Save my edit again" in page

    again = operator_client.post(url("profile_edit", light_scope.pk, "speaker"), {**EDIT, "version": "2"})

    assert again.status_code == 302
    data, row = get_profile(keys, "speaker", "u1")
    assert (row.version, data["traits"], data["notes"]) == (3, ["curious", "patient"], "mine")


def test_it_answers_an_htmx_conflict_with_the_panel(operator_client, url, light_scope, keys, alice):
    profile(keys, "u1", name="Alicia")
    response = operator_client.post(
        url("profile_edit", light_scope.pk, "speaker"), {**EDIT, "version": "1"}, **htmx("profile-panel")
    )
    html = response.content.decode()
    assert response.status_code == 409
    assert html.lstrip().startswith('<div id="profile-panel"') and "<html" not in html
    assert re.search(r'<li class="diff-added">.*?Name: Alicia</li>', html)


def test_it_shows_a_profile_created_meanwhile_against_an_empty_one(operator_client, url, light_scope, keys):
    profile(keys, name="Travel club")  # the session profile did not exist when the form was rendered
    response = operator_client.post(
        url("profile_edit", light_scope.pk, "session"), {"name": "Hiking club", "version": "0"}
    )
    assert response.status_code == 409
    assert re.search(r'<li class="diff-added">.*?Name: Travel club</li>', response.content.decode())
    assert get_profile(keys, "session")[0]["name"] == "Travel club"


def test_it_answers_400_to_a_version_that_is_no_number(operator_client, url, light_scope, keys, alice):
    response = operator_client.post(url("profile_edit", light_scope.pk, "speaker"), {**EDIT, "version": "x"})
    assert response.status_code == 400
    assert get_profile(keys, "speaker", "u1")[1].version == 1


# --- the Episodes tab's time filter ----------------------------------------------------------------


def test_it_lists_an_episode_at_exactly_the_until_time(viewer_client, url, light_scope, keys):
    noon = datetime(2026, 1, 7, 12, 0, tzinfo=UTC)
    plain_episodes(keys, 1, content="the noon ferry", timestamp=noon, start=100)

    page = viewer_client.get(url("episodes", light_scope.pk), {"before": "2026-01-07T12:00"}).content.decode()
    assert "the noon ferry" in page
    same = viewer_client.get(
        url("episodes", light_scope.pk), {"after": "2026-01-07T12:00", "before": "2026-01-07T12:00"}
    )
    assert same.status_code == 200 and "the noon ferry" in same.content.decode()


def test_it_explains_a_conflict_in_the_language_of_the_request(operator_client, url, light_scope, keys, alice):
    profile(keys, "u1", name="Alicia")
    edit = url("profile_edit", light_scope.pk, "speaker")
    chinese = operator_client.post(edit, {**EDIT, "version": "1"}, HTTP_ACCEPT_LANGUAGE="zh-Hans")
    assert (
        "在您编辑期间，其他人保存了此画像" in chinese.content.decode()
        and "再次保存我的编辑" in chinese.content.decode()
    )
    spanish = operator_client.post(edit, {**EDIT, "version": "1"}, HTTP_ACCEPT_LANGUAGE="es")
    assert "Los cambios de la otra persona de la versión 1 a la versión 2:" in spanish.content.decode()


def test_saving_again_after_a_conflict_keeps_their_change_to_fields_i_left_alone(
    operator_client, url, light_scope, keys, alice
):
    # I read version 1 (name Alice, trait curious, no notes) and add a trait; meanwhile they wrote notes.
    profile(keys, "u1", name="Alice", traits=["curious"], notes="Their notes about Alice")
    mine = {"sender_id": "u1", "name": "Alice", "traits": "curious\r\npatient", "preferences": "", "notes": ""}

    response = operator_client.post(url("profile_edit", light_scope.pk, "speaker"), {**mine, "version": "1"})

    assert response.status_code == 409
    page = response.content.decode()
    assert "Their notes about Alice</textarea>" in page and "curious\r\npatient</textarea>" in page
    form = {name: re.search(rf'name="{name}"[^>]*>([^<]*)</textarea>', page, re.S) for name in ("traits", "notes")}
    again = {**mine, "version": "2", **{name: match.group(1).lstrip("\n") for name, match in form.items()}}
    assert operator_client.post(url("profile_edit", light_scope.pk, "speaker"), again).status_code == 302
    data, row = get_profile(keys, "speaker", "u1")
    assert (row.version, data["traits"], data["notes"]) == (3, ["curious", "patient"], "Their notes about Alice")
