"""Editing memory by hand (issue 17): edit an episode (audited, re-embedded, `if_version`), reassign
its speaker in one action, add an episode with source `console`."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from memconsole.memory import editing, lexical, tamper
from memconsole.memory.errors import Conflict, NotFound
from memconsole.memory.models import AuditEntry, Episode
from memconsole.memory.retrieval import recall
from tests.factories import plain_episodes

from .conftest import htmx

pytestmark = pytest.mark.django_db


def _form(episode: Episode, **changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "content": episode.content,
        "tags": ", ".join(episode.tags),
        "importance": str(episode.importance),
        "kind": episode.kind,
        "sender_id": episode.sender_id,
        "sender_name": episode.sender_name,
        "timestamp": "",
        "version": str(episode.version),
    }
    data.update(changes)
    return data


@pytest.fixture
def tea(scope_with_episodes) -> Episode:
    return next(e for e in scope_with_episodes if "绿茶" in e.content)


def test_it_edits_an_episode_audited_with_before_and_after_and_reembedded(
    operator_client, url, scope, keys, tea, system
):
    response = operator_client.post(
        url("episode_edit", scope.pk, tea.episode_id),
        _form(tea, content="I prefer oolong tea now", tags="drink, correction", importance="4"),
    )
    assert response.status_code == 302
    assert response["Location"] == url("episode_detail", scope.pk, tea.episode_id)
    tea.refresh_from_db()
    assert (tea.content, tea.tags, tea.importance, tea.version) == (
        "I prefer oolong tea now",
        ["drink", "correction"],
        4,
        1,
    )
    assert tea.tags_text == ",drink,correction,"
    entry = AuditEntry.objects.filter(operation="episode_edit", target_id=tea.episode_id).get()
    assert entry.payload["before"] == {"content": "我喜欢喝绿茶", "tags": ["drink"], "importance": 2}
    assert entry.payload["after"]["content"] == "I prefer oolong tea now"
    assert entry.payload["metadata"]["version"] == 1
    # re-embedded: the new words find it, and its vector is current
    assert tea.vector_current
    hits = recall(keys, "oolong", top_k=1, actor=system)
    assert hits[0].episode.episode_id == tea.episode_id


def test_it_shows_the_edit_form_with_the_stored_values(operator_client, url, scope, tea):
    page = operator_client.get(url("episode_edit", scope.pk, tea.episode_id)).content.decode()
    assert "我喜欢喝绿茶" in page
    assert re.search(r'name="version" value="0"', page)
    assert 'option value="u1">Alice (u1)</option>' in page  # the speaker picker shows names


def test_it_refuses_a_stale_edit_and_shows_the_other_change(operator_client, url, scope, keys, tea, system):
    stale = _form(tea, content="my edit")
    editing.edit_episode(keys, system, tea.episode_id, content="their edit")
    response = operator_client.post(url("episode_edit", scope.pk, tea.episode_id), stale)
    assert response.status_code == 409
    page = response.content.decode()
    assert "their edit" in page and "我喜欢喝绿茶" in page  # their change, before and after
    assert "my edit" in page and "Save my edit again" in page
    assert 'name="version" value="1"' in page
    tea.refresh_from_db()
    assert tea.content == "their edit"
    again = operator_client.post(url("episode_edit", scope.pk, tea.episode_id), _form(tea, content="my edit"))
    assert again.status_code == 302
    tea.refresh_from_db()
    assert (tea.content, tea.version) == ("my edit", 2)


def test_it_answers_htmx_with_the_form_fragment_or_a_redirect(operator_client, url, scope, tea):
    bad = operator_client.post(url("episode_edit", scope.pk, tea.episode_id), _form(tea, content=" "), **htmx())
    assert bad.status_code == 400
    assert b"<html" not in bad.content and b'id="episode-form"' in bad.content
    ok = operator_client.post(url("episode_edit", scope.pk, tea.episode_id), _form(tea, importance="5"), **htmx())
    assert ok.status_code == 200
    assert ok["HX-Redirect"] == url("episode_detail", scope.pk, tea.episode_id)


def test_it_writes_nothing_for_an_edit_that_changes_nothing(operator_client, url, scope, tea):
    operator_client.post(url("episode_edit", scope.pk, tea.episode_id), _form(tea))
    assert not AuditEntry.objects.filter(operation="episode_edit").exists()


def test_saving_the_form_as_rendered_keeps_the_event_times_seconds(operator_client, url, scope, tea):
    """The time input shows minutes: posting it back unchanged must not cut the stored seconds off
    (it did, audited as an edit of the time), while another edit of the same form keeps them too."""
    stamp = tea.timestamp.replace(second=28, microsecond=394723)
    Episode.objects.filter(pk=tea.pk).update(timestamp=stamp)
    tea.refresh_from_db()
    page = operator_client.get(url("episode_edit", scope.pk, tea.episode_id)).content.decode()
    shown = re.search(r'name="timestamp" value="([^"]+)"', page)[1]

    response = operator_client.post(url("episode_edit", scope.pk, tea.episode_id), _form(tea, timestamp=shown))
    assert response.status_code == 302
    operator_client.post(url("episode_edit", scope.pk, tea.episode_id), _form(tea, timestamp=shown, importance="4"))

    tea.refresh_from_db()
    assert (tea.timestamp, tea.importance) == (stamp, 4)
    [edit] = AuditEntry.objects.filter(operation="episode_edit")  # the unchanged save wrote nothing
    assert "importance" in edit.payload["summary"] and "timestamp" not in edit.payload["summary"]


def test_it_refuses_edits_to_a_viewer_and_hides_other_scopes(viewer_client, granted_client, url, scope, tea):
    assert viewer_client.get(url("episode_edit", scope.pk, tea.episode_id)).status_code == 403
    assert viewer_client.post(url("episode_edit", scope.pk, tea.episode_id), _form(tea)).status_code == 403
    assert granted_client.get(url("episode_edit", scope.pk, tea.episode_id)).status_code == 404
    assert viewer_client.post(url("episode_add", scope.pk), {"content": "x", "importance": "2"}).status_code == 403


def test_it_does_not_edit_another_scopes_episode(operator_client, url, scope, other_scope, other_keys):
    other = Episode.objects.in_scope(other_keys.user_key).get()
    assert operator_client.get(url("episode_edit", scope.pk, other.episode_id)).status_code == 404
    response = operator_client.post(url("episode_edit", scope.pk, other.episode_id), _form(other, content="leak"))
    assert response.status_code == 404
    other.refresh_from_db()
    assert other.content == "Bot B remembers the blue door"


def test_it_reassigns_the_speaker_by_name_in_one_audited_action(operator_client, url, scope, tea):
    response = operator_client.post(
        url("episode_reassign", scope.pk, tea.episode_id), {"speaker": "alice", "version": "0"}, **htmx()
    )
    assert response.status_code == 200
    assert b"<html" not in response.content and b"Alice (u1)" in response.content
    tea.refresh_from_db()
    assert (tea.sender_id, tea.sender_name, tea.version) == ("u1", "Alice", 1)
    entry = AuditEntry.objects.get(operation="episode_reassign")
    assert entry.payload["before"] == {"sender_id": "u2", "sender_name": "Bob"}
    assert entry.payload["after"] == {"sender_id": "u1", "sender_name": "Alice"}


def test_it_asks_which_speaker_a_shared_name_means(operator_client, url, scope, keys, tea):
    plain_episodes(keys, 1, sender_id="u7", sender_name="Alice")
    response = operator_client.post(url("episode_reassign", scope.pk, tea.episode_id), {"speaker": "Alice"})
    assert response.status_code == 400
    assert "Alice (u1)" in response.content.decode() and "Alice (u7)" in response.content.decode()
    tea.refresh_from_db()
    assert tea.sender_id == "u2"


def test_it_refuses_a_speaker_no_one_is_called_unless_asked_to_make_a_new_one(operator_client, url, scope, tea):
    """Found by a console user: a typo ("Zed") silently made a new speaker id and moved the memory to it."""
    response = operator_client.post(
        url("episode_reassign", scope.pk, tea.episode_id), {"speaker": "Zed", "version": "0"}
    )
    assert response.status_code == 400 and "No speaker is called “Zed” in this space" in response.content.decode()
    tea.refresh_from_db()
    assert tea.sender_id == "u2" and not AuditEntry.objects.filter(operation="episode_reassign").exists()

    response = operator_client.post(
        url("episode_reassign", scope.pk, tea.episode_id), {"speaker": "Zed", "new_speaker": "on", "version": "0"}
    )
    assert response.status_code in (200, 302)
    tea.refresh_from_db()
    assert tea.sender_id == "Zed"


def test_invisible_characters_make_no_tag_and_no_speaker(operator_client, url, scope, tea):
    # an edit stored "\u200b" as a tag, and a reassignment made "\u200b" the speaker ("now about ​")
    edit = url("episode_edit", scope.pk, tea.episode_id)
    assert operator_client.post(edit, _form(tea, tags="health, \u200b, emoji😀")).status_code == 302
    tea.refresh_from_db()
    assert tea.tags == ["health", "emoji😀"]
    reassign = url("episode_reassign", scope.pk, tea.episode_id)
    form = {"speaker": "\u200b", "new_speaker": "on", "version": str(tea.version)}
    assert operator_client.post(reassign, form).status_code == 400
    assert operator_client.post(edit, _form(tea, sender_id="\ufeffu2\u200b")).status_code == 302
    tea.refresh_from_db()
    assert tea.sender_id == "u2" and not AuditEntry.objects.filter(operation="episode_reassign").exists()


def test_a_search_of_invisible_characters_only_shows_the_list(operator_client, url, scope, tea):
    # answered 400 "query must not be empty", in English on a Spanish page
    response = operator_client.get(url("episodes", scope.pk), {"q": "\u200b"}, HTTP_ACCEPT_LANGUAGE="es")
    assert response.status_code == 200 and "query must not be empty" not in response.content.decode()
    assert tea.episode_id in response.content.decode()


def test_it_adds_an_episode_by_hand(operator_client, url, scope, keys, system):
    response = operator_client.post(
        url("episode_add", scope.pk),
        {"content": "Carol is allergic to peanuts", "tags": "health", "importance": "5", "sender_id": "Alice"},
    )
    assert response.status_code == 302
    added = Episode.objects.in_scope(keys.user_key).get(content_stored="Carol is allergic to peanuts")
    assert (added.source, added.sender_id, added.sender_name, added.importance) == ("console", "u1", "Alice", 5)
    assert AuditEntry.objects.filter(operation="remember", target_id=added.episode_id).exists()
    assert added.vector_current


def test_it_sets_and_clears_an_episodes_kind_audited_and_found_by_the_kind_filter(
    operator_client, url, scope, keys, tea
):
    # the kind a bot gave a memory could be filtered by but not corrected in the console
    edit = url("episode_edit", scope.pk, tea.episode_id)
    assert operator_client.post(edit, _form(tea, kind="preference")).status_code == 302
    tea.refresh_from_db()
    assert (tea.kind, tea.version) == ("preference", 1)
    entry = AuditEntry.objects.filter(operation="episode_edit", target_id=tea.episode_id).get()
    assert (entry.payload["before"], entry.payload["after"]) == ({"kind": ""}, {"kind": "preference"})
    assert tamper.check_rows().ok
    listed = operator_client.get(url("episodes", scope.pk), {"kind": "preference"}).content.decode()
    assert tea.episode_id in listed
    assert 'value="preference"' in operator_client.get(edit).content.decode()  # the form shows the stored kind

    refused = operator_client.post(edit, _form(tea, kind="two words"))
    assert refused.status_code == 400 and "A kind is one word" in refused.content.decode()
    assert operator_client.post(edit, _form(tea, kind="")).status_code == 302
    tea.refresh_from_db()
    assert tea.kind == ""


def test_it_refuses_an_event_time_in_the_future_with_the_reason(operator_client, url, scope, tea):
    form = _form(tea, timestamp="2999-01-01T10:00")
    response = operator_client.post(url("episode_edit", scope.pk, tea.episode_id), form)
    assert response.status_code == 400 and "timestamp is in the future" in response.content.decode()
    tea.refresh_from_db()
    assert tea.version == 0


def test_it_adds_an_episode_with_a_kind(operator_client, url, scope, keys):
    data = {"content": "Dan likes jazz", "tags": "", "importance": "3", "kind": "preference", "sender_id": ""}
    assert operator_client.post(url("episode_add", scope.pk), data).status_code == 302
    assert Episode.objects.in_scope(keys.user_key).get(content_stored="Dan likes jazz").kind == "preference"


def test_it_shows_the_add_form(operator_client, url, scope):
    page = operator_client.get(url("episode_add", scope.pk))
    assert page.status_code == 200 and b"Add an episode" in page.content
    fragment = operator_client.get(url("episode_add", scope.pk), **htmx())
    assert b"<html" not in fragment.content and b'id="episode-form"' in fragment.content


def test_the_domain_refuses_a_stale_version_and_other_scopes(keys, other_keys, system, tea):
    with pytest.raises(Conflict):
        editing.edit_episode(keys, system, tea.episode_id, importance=3, if_version=5)
    with pytest.raises(NotFound):
        editing.edit_episode(other_keys, system, tea.episode_id, importance=3)


def test_an_edit_keeps_the_tamper_check_and_the_lexical_index_in_step(keys, system, tea):
    editing.edit_episode(keys, system, tea.episode_id, content="Oolong with Carol", sender_id="u9", sender_name="Zed")
    assert tamper.check_rows().ok
    candidates = lexical.LexicalQuery.build(keys.user_key, "oolong carol").candidates(10)
    assert tea.pk in candidates


def test_saving_again_after_a_conflict_keeps_their_change_to_fields_i_left_alone(
    operator_client, url, scope, keys, tea, system
):
    stale = _form(tea, content="I prefer oolong")
    editing.edit_episode(keys, system, tea.episode_id, tags=["drink", "tea"], importance=4)
    response = operator_client.post(url("episode_edit", scope.pk, tea.episode_id), stale)
    assert response.status_code == 409
    page = response.content.decode()
    assert 'value="drink, tea"' in page and '<option value="4" selected>' in page
    assert "I prefer oolong" in page
    data = dict(stale, tags="drink, tea", importance="4", version="1")
    assert operator_client.post(url("episode_edit", scope.pk, tea.episode_id), data).status_code == 302
    tea.refresh_from_db()
    assert (tea.content, tea.tags, tea.importance, tea.version) == ("I prefer oolong", ["drink", "tea"], 4, 2)


def test_saving_again_after_a_conflict_keeps_their_new_event_time(operator_client, url, scope, keys, tea, system):
    shown = tea.timestamp.strftime("%Y-%m-%dT%H:%M")  # the input as the form was rendered (UTC here)
    stale = _form(tea, content="I prefer oolong", timestamp=shown)
    theirs = datetime(2020, 5, 5, 5, 5, 30, tzinfo=UTC)
    editing.edit_episode(keys, system, tea.episode_id, timestamp=theirs)

    response = operator_client.post(url("episode_edit", scope.pk, tea.episode_id), stale)
    assert response.status_code == 409
    page = response.content.decode()
    assert 'value="2020-05-05T05:05"' in page and "2020-05-05 05:05 UTC" in page  # their time, readable
    again = dict(stale, timestamp=re.search(r'name="timestamp" value="([^"]*)"', page).group(1), version="1")
    assert operator_client.post(url("episode_edit", scope.pk, tea.episode_id), again).status_code == 302
    tea.refresh_from_db()
    assert (tea.content, tea.timestamp, tea.version) == ("I prefer oolong", theirs, 2)
