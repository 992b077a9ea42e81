"""Finding people by name (issue 17): "open speaker profile", the erasure form and the speaker
picker take a name or an id; a name several ids share asks which; titles show names."""

from __future__ import annotations

import pytest

from memconsole.memory import facts, people
from tests.factories import plain_episodes, profile

from .conftest import htmx

pytestmark = pytest.mark.django_db


@pytest.fixture
def named(light_scope, keys):
    """Eve (u5) speaks in the scope's episodes; Nora (u8) has only a speaker profile."""
    profile(keys, "u8", name="Nora", traits=["calm"])
    return light_scope


def test_it_opens_a_speaker_profile_by_name(viewer_client, url, named):
    base = url("profile_detail", named.pk, "speaker")
    response = viewer_client.get(base, {"sender": "eve"})
    assert response.status_code == 302 and response["Location"] == f"{base}?sender=u5"
    by_profile_name = viewer_client.get(base, {"sender": "Nora"})
    assert by_profile_name["Location"] == f"{base}?sender=u8"
    page = viewer_client.get(base, {"sender": "u8"}).content.decode()
    assert "Speaker profile: Nora (u8)" in page and "<title>Speaker profile: Nora" in page


def test_it_asks_which_speaker_a_shared_name_means(viewer_client, url, named, keys):
    plain_episodes(keys, 1, start=10, sender_id="u6", sender_name="Eve")
    response = viewer_client.get(url("profile_detail", named.pk, "speaker"), {"sender": "Eve"}, **htmx())
    page = response.content.decode()
    assert response.status_code == 200 and "<html" not in page
    assert "which one?" in page and "Eve (u5)" in page and "Eve (u6)" in page


def test_it_keeps_an_unknown_id_as_a_new_speaker_and_says_no_one_has_it(viewer_client, operator_client, url, named):
    # a mistyped name ("Bobb") opened an empty profile as if such a speaker existed
    response = viewer_client.get(url("profile_detail", named.pk, "speaker"), {"sender": "Bobb"})
    page = response.content.decode()
    assert response.status_code == 200 and "There is no profile yet" in page
    assert "No one in this space is named “Bobb” or has that speaker ID." in page and "Saving the form" not in page
    page = operator_client.get(url("profile_detail", named.pk, "speaker"), {"sender": "Bobb"}).content.decode()
    assert "starts a profile for a new speaker with the ID “Bobb”" in page
    for known in ("u5", "u8"):  # one who speaks, one with only a profile
        page = viewer_client.get(url("profile_detail", named.pk, "speaker"), {"sender": known}).content.decode()
        assert "No one in this space" not in page


def test_a_speaker_known_only_by_facts_is_not_called_unknown(viewer_client, url, named, keys, system):
    facts.remember_fact(keys, system, "u42", "city", "Lisbon")
    page = viewer_client.get(url("profile_detail", named.pk, "speaker"), {"sender": "u42"}).content.decode()
    assert "Lisbon" in page and "No one in this space" not in page


def test_the_speaker_picker_shows_names_with_ids(viewer_client, url, named):
    options = viewer_client.get(url("speaker_options", named.pk)).content.decode()
    assert '<option value="u5">Eve (u5)</option>' in options
    assert '<option value="u8">Nora (u8)</option>' in options  # a profile's name fills a blank label


def test_it_hides_another_scopes_people(granted_client, url, named):
    assert granted_client.get(url("profile_detail", named.pk, "speaker"), {"sender": "Eve"}).status_code == 404
    assert granted_client.get(url("speaker_options", named.pk)).status_code == 404


def test_the_erasure_form_takes_a_name(admin_client_, url, named):
    response = admin_client_.post(url("erasure"), {"sender_id": "EVE", "bot_uuid": ""})
    assert response.status_code == 200
    page = response.content.decode()
    assert 'name="sender_id" value="u5"' in page  # the confirmation step carries the id it names


def test_the_erasure_form_asks_which_when_a_name_is_shared(admin_client_, url, named, other_keys):
    plain_episodes(other_keys, 1, sender_id="u6", sender_name="Eve")
    response = admin_client_.post(url("erasure"), {"sender_id": "Eve", "bot_uuid": ""}, **htmx())
    assert response.status_code == 400 and b"<html" not in response.content
    assert "Eve (u5)" in response.content.decode() and "Eve (u6)" in response.content.decode()


def test_the_erasure_form_is_for_admins_only(operator_client, url, named):
    assert operator_client.post(url("erasure"), {"sender_id": "Eve", "bot_uuid": ""}).status_code == 403


def test_the_lookup_never_reads_another_scope(keys, other_keys, named):
    plain_episodes(other_keys, 1, sender_id="u6", sender_name="Zoe")
    assert people.find_in_scope(keys, "Zoe").person is None
    assert people.find_in_scope(other_keys, "zoe").person == people.Person("u6", "Zoe")


def test_the_speaker_filter_takes_a_name(viewer_client, url, scope):
    by_name = viewer_client.get(url("episodes", scope.pk), {"sender": "bob", "status": "all"}, **htmx())
    page = by_name.content.decode()
    assert by_name.status_code == 200 and "<html" not in page
    assert "我喜欢喝绿茶" in page and "Beijing" not in page  # Bob's episodes only, Alice's not


def test_the_speaker_filter_asks_which_for_a_shared_name(viewer_client, url, scope, keys):
    plain_episodes(keys, 1, sender_id="u7", sender_name="Bob")
    response = viewer_client.get(url("episodes", scope.pk), {"sender": "Bob"})
    assert response.status_code == 400
    assert "Bob (u2)" in response.content.decode() and "Bob (u7)" in response.content.decode()


def test_it_escapes_hostile_names_in_the_choices(operator_client, url, scope, keys):
    hostile = '<script>alert("x")</script>'
    plain_episodes(keys, 2, start=20, sender_id=lambda n: f"h{n}", sender_name=hostile)
    episode = plain_episodes(keys, 1, start=30)[0]
    for response in (
        operator_client.get(url("profile_detail", scope.pk, "speaker"), {"sender": hostile}),
        operator_client.post(url("episode_reassign", scope.pk, episode.episode_id), {"speaker": hostile}),
        operator_client.get(url("episode_edit", scope.pk, episode.episode_id)),
    ):
        assert hostile not in response.content.decode()
        assert "&lt;script&gt;" in response.content.decode()
