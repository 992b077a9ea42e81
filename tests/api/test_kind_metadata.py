"""Issue 20: an episode's kind and metadata over the API, a bot's sessions, forgetting a whole session."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from memconsole.memory import validation
from memconsole.memory.episode_extras import EpisodeMetadata
from memconsole.memory.models import AuditEntry, Episode

from .conftest import SCOPE_A

pytestmark = pytest.mark.django_db


def _remember(api, content, scope=SCOPE_A, **fields):
    response = api.post("remember", {**scope, "content": content, **fields})
    assert response.status_code == 201, response.content
    return response.json()["episode_id"]


def test_it_stores_kind_and_metadata_and_recalls_them(api):
    episode_id = _remember(api, "Do you ship to Norway?", kind="question", metadata={"channel": "web", "n": [1, 2]})
    _remember(api, "Yes, we ship to Norway", kind="answer")

    hits = api.post("recall", {**SCOPE_A, "query": "shipping to Norway", "top_k": 5}).json()["episodes"]
    by_id = {hit["episode_id"]: hit for hit in hits}
    assert by_id[episode_id]["kind"] == "question"
    assert by_id[episode_id]["metadata"] == {"channel": "web", "n": [1, 2]}
    assert {hit["kind"] for hit in hits} == {"question", "answer"}


def test_it_filters_recall_and_the_list_by_kind(api):
    _remember(api, "Do you ship to Norway?", kind="question")
    answer = _remember(api, "Yes, we ship to Norway", kind="answer")
    _remember(api, "Norway is cold", tags=["weather"])

    hits = api.post("recall", {**SCOPE_A, "query": "Norway", "kind": "answer"}).json()["episodes"]
    assert [hit["episode_id"] for hit in hits] == [answer]
    listed = api.get("episodes", {**SCOPE_A, "kind": "answer"}).json()["episodes"]
    assert [row["episode_id"] for row in listed] == [answer]
    assert listed[0]["kind"] == "answer" and listed[0]["metadata"] == {}


def test_an_empty_kind_is_no_kind_as_answers_give_it(api):
    """A client that sends back what it read (`"kind": ""` for an episode without one) is not refused."""
    plain = _remember(api, "Norway has fjords", kind="")
    _remember(api, "Do you ship to Norway?", kind="question")
    assert Episode.objects.get(episode_id=plain).kind == ""

    hits = api.post("recall", {**SCOPE_A, "query": "Norway", "kind": ""}).json()["episodes"]
    assert len(hits) == 2  # no kind filter, as when it is left out
    assert len(api.get("episodes", {**SCOPE_A, "kind": ""}).json()["episodes"]) == 2


def test_it_seals_metadata_like_content(api, settings):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    _remember(api, "secret plan", metadata={"card": "4111 1111"})
    row = EpisodeMetadata.objects.get()
    assert row.encrypted and "4111" not in row.payload_stored
    assert row.payload == {"card": "4111 1111"}
    assert Episode.objects.get().metadata == {"card": "4111 1111"}


@pytest.mark.parametrize(
    ("fields", "status", "field"),
    [
        ({"kind": "two words"}, 422, "kind"),
        ({"kind": "k" * 41}, 422, "kind"),
        ({"kind": 3}, 400, "kind"),
        ({"metadata": ["not", "an", "object"]}, 400, "metadata"),
        ({"metadata": {"blob": "x" * validation.MAX_METADATA_BYTES}}, 422, "metadata"),
        ({"metadata": {"deep": [[[[[[[[[1]]]]]]]]]}}, 422, "metadata"),
    ],
)
def test_it_refuses_a_bad_kind_or_metadata(api, fields, status, field):
    response = api.post("remember", {**SCOPE_A, "content": "x", **fields})
    assert response.status_code == status, response.content
    assert response.json()["error"]["field"] == field
    assert not Episode.objects.exists()


def test_it_keeps_metadata_in_the_audit_entry_and_deletes_it_with_the_episode(api):
    episode_id = _remember(api, "Alice asked about refunds", kind="question", metadata={"ticket": 42})
    entry = AuditEntry.objects.get(operation="remember")
    assert entry.payload["after"]["kind"] == "question" and entry.payload["after"]["metadata"] == {"ticket": 42}

    assert api.post("forget", {**SCOPE_A, "episode_id": episode_id}).json() == {"deleted": True, "count": 1}
    assert not EpisodeMetadata.objects.exists()
    deleted = AuditEntry.objects.get(operation="delete")
    assert deleted.payload["before"]["metadata"] == {"ticket": 42}


def test_it_lists_a_bots_sessions_with_counts(api, api_b):
    _remember(api, "one")
    _remember(api, "two")
    _remember(api, "three", scope={**SCOPE_A, "session_name": "person_7"})
    shared = {**SCOPE_A, "session_name": "group_300", "isolation": "bot"}
    _remember(api, "four", scope=shared)
    _remember(api, "five", scope={**shared, "session_name": "group_301"})
    _remember(api_b, "other bot", scope={"bot_uuid": "bot-b", "session_name": "group_100"})

    found = api.get("sessions", {"bot_uuid": "bot-a"}).json()["sessions"]
    counts = {(row["session_name"], row["isolation"]): row["episodes"] for row in found}
    assert counts == {
        ("group_100", "session"): 2,
        ("person_7", "session"): 1,
        ("group_300", "bot"): 1,
        ("group_301", "bot"): 1,
    }
    assert found[0]["session_name"] == "group_301"  # most recently used first
    assert api.get("sessions", {"bot_uuid": "bot-a", "limit": "1"}).json()["sessions"][0]["session_name"] == (
        "group_301"
    )


def test_it_refuses_sessions_of_a_bot_the_token_does_not_hold(api):
    response = api.get("sessions", {"bot_uuid": "bot-b"})
    assert response.status_code == 403
    assert api.get("sessions", {}).status_code == 422
    assert api.get("sessions", {"bot_uuid": "bot-a", "session_name": "x"}).status_code == 400
    for limit in ("0", "1001"):  # the field at fault, not a session_name this list does not take
        refused = api.get("sessions", {"bot_uuid": "bot-a", "limit": limit})
        assert refused.status_code == 422 and refused.json()["error"]["field"] == "limit", refused.content


def test_it_forgets_a_whole_session_as_one_batch(api):
    for n in range(3):
        _remember(api, f"memory {n}", metadata={"n": n})
    kept = _remember(api, "another chat", scope={**SCOPE_A, "session_name": "group_101"})

    answer = api.post("forget", {**SCOPE_A, "all": True})
    assert answer.status_code == 200 and answer.json() == {"deleted": True, "count": 3}
    assert list(Episode.objects.values_list("episode_id", flat=True)) == [kept]
    deletes = list(AuditEntry.objects.filter(operation="delete"))
    assert len(deletes) == 3 and len({entry.batch_id for entry in deletes}) == 1 and deletes[0].batch_id
    assert api.post("forget", {**SCOPE_A, "all": True}).json() == {"deleted": True, "count": 0}


def test_it_forgets_only_the_sessions_share_under_bot_isolation(api):
    shared = {**SCOPE_A, "isolation": "bot"}
    _remember(api, "written in group_100", scope=shared)
    other = _remember(api, "written in group_101", scope={**shared, "session_name": "group_101"})

    assert api.post("forget", {**shared, "all": True}).json()["count"] == 1
    assert list(Episode.objects.values_list("episode_id", flat=True)) == [other]


@pytest.mark.parametrize(
    "body",
    [{}, {"all": False}, {"all": True, "episode_id": "0123456789ab"}],
)
def test_it_wants_one_episode_or_all(api, body):
    response = api.post("forget", {**SCOPE_A, **body})
    assert response.status_code == 422 and response.json()["error"]["field"] == "episode_id"


def test_it_refuses_to_forget_another_bots_session(api):
    response = api.post("forget", {"bot_uuid": "bot-b", "session_name": "group_100", "all": True})
    assert response.status_code == 403
