"""Issue 14 over HTTP: forgiving writes (`adjusted`, `query_id`), filters that mean what they say, and
profiles that keep working (`evicted`, `append_notes`, `if_version` and 409). Every answer is also
checked against the OpenAPI document (conftest.Api)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memconsole.api import site
from memconsole.memory import validation
from memconsole.memory.models import AuditEntry, Episode, Profile, ProfileVersion

from .conftest import SCOPE_A, memory_rows

pytestmark = pytest.mark.django_db

SPEAKER = {**SCOPE_A, "type": "speaker", "sender_id": "u1"}


def _remember(api, **fields):
    response = api.post("remember", {**SCOPE_A, "content": "Alice lives in Lisbon", **fields})
    assert response.status_code == 201, response.content
    return response.json()


@pytest.mark.parametrize(("given", "stored"), [(7, 5), (0, 1), (-2, 1), (10**30, 5)])
def test_it_stores_an_importance_outside_1_to_5_clamped_and_says_so(api, given, stored):
    body = _remember(api, importance=given)
    assert (body["importance"], body["adjusted"]) == (stored, ["importance"])
    assert Episode.objects.get(episode_id=body["episode_id"]).importance == stored


def test_it_adjusts_nothing_for_an_importance_within_limits(api):
    body = _remember(api, importance=4)
    assert (body["importance"], body["adjusted"]) == (4, [])


@pytest.mark.parametrize("importance", [2.5, "3", True])
def test_it_still_refuses_an_importance_that_is_not_a_whole_number(api, importance):
    before = memory_rows()
    response = api.post("remember", {**SCOPE_A, "content": "x", "importance": importance})
    assert response.status_code == 400 and response.json()["error"]["field"] == "importance"
    assert memory_rows() == before


def test_it_keeps_the_query_id_of_a_remembered_episode(api):
    body = _remember(api, query_id="msg-8812")
    assert Episode.objects.get(episode_id=body["episode_id"]).query_id == "msg-8812"
    assert AuditEntry.objects.get(operation="remember", target_id=body["episode_id"]).query_id == "msg-8812"
    response = api.post("remember", {**SCOPE_A, "content": "x", "query_id": "q" * 256})
    assert response.status_code == 422 and response.json()["error"]["field"] == "query_id"


def test_it_trims_content(api):
    body = _remember(api, content="  Alice lives in Lisbon \n")
    assert Episode.objects.get(episode_id=body["episode_id"]).content == "Alice lives in Lisbon"
    assert api.post("remember", {**SCOPE_A, "content": " \n "}).status_code == 422


def test_it_includes_time_before_and_reads_a_time_without_a_zone_as_utc(api):
    body = _remember(api, timestamp="2026-01-07T12:00:00")  # no zone: UTC
    assert Episode.objects.get(episode_id=body["episode_id"]).timestamp == datetime(2026, 1, 7, 12, tzinfo=UTC)

    def found(**filters):
        response = api.post("recall", {**SCOPE_A, "query": "Where does Alice live?", **filters})
        assert response.status_code == 200, response.content
        return [hit["episode_id"] for hit in response.json()["episodes"]]

    assert found(time_before="2026-01-07T12:00:00Z") == [body["episode_id"]]
    assert found(time_before="2026-01-07T12:00:00") == [body["episode_id"]]
    assert found(time_after="2026-01-07T12:00:00", time_before="2026-01-07T12:00:00") == [body["episode_id"]]
    assert found(time_before="2026-01-07T11:59:59Z") == []


def test_it_reads_an_empty_statuses_list_as_active(api):
    body = _remember(api)
    response = api.post("recall", {**SCOPE_A, "query": "Alice", "statuses": []})
    assert response.status_code == 200
    assert [hit["episode_id"] for hit in response.json()["episodes"]] == [body["episode_id"]]
    assert api.post("recall", {**SCOPE_A, "query": "Alice", "statuses": ["deleted"]}).status_code == 422


def test_it_returns_the_episode_named_by_its_id_first(api):
    old = _remember(api, content="We adopted a puppy", importance=1, timestamp="2020-01-01T00:00:00Z")
    for n in range(3):
        _remember(api, content=f"Fresh note {n}")
    response = api.post("recall", {**SCOPE_A, "query": old["episode_id"], "top_k": 1})
    assert [hit["episode_id"] for hit in response.json()["episodes"]] == [old["episode_id"]]


# --- profiles -----------------------------------------------------------------------------------------


def _update(api, **fields):
    response = api.post("profile", {**SPEAKER, **fields})
    assert response.status_code == 200, response.content
    return response.json()


def test_it_evicts_the_oldest_items_of_a_full_profile_and_says_which(api):
    _update(api, add_traits=[f"trait {n}" for n in range(20)], add_preferences=[f"pref {n}" for n in range(10)])

    body = _update(api, add_traits=["night owl"], add_preferences=["tea"])

    assert body["traits"][-1] == "night owl" and "trait 0" not in body["traits"] and len(body["traits"]) == 20
    assert body["evicted"] == {"traits": ["trait 0"], "preferences": ["pref 0"]}
    assert body["adjusted"] == []
    entry = AuditEntry.objects.filter(operation="profile_update").order_by("-id").first()
    assert entry.payload["metadata"]["evicted"] == {"traits": ["trait 0"], "preferences": ["pref 0"]}


def test_it_cuts_long_notes_and_appends_a_line(api):
    body = _update(api, set={"notes": "n" * 2100})
    assert (len(body["notes"]), body["adjusted"]) == (2000, ["notes"])

    body = _update(api, set={"notes": "Likes trains"}, append_notes="Visits in May")
    assert (body["notes"], body["adjusted"]) == ("Likes trains\nVisits in May", [])
    body = _update(api, append_notes="Has a dog")
    assert body["notes"] == "Likes trains\nVisits in May\nHas a dog"
    assert body["evicted"] == {"traits": [], "preferences": []}


def test_it_answers_409_to_a_stale_if_version_and_changes_nothing(api):
    first = _update(api, set={"name": "Alice"})
    _update(api, add_traits=["kind"], if_version=first["version"])  # the version read: accepted
    before = memory_rows()

    response = api.post("profile", {**SPEAKER, "set": {"name": "Mallory"}, "if_version": first["version"]})

    assert response.status_code == 409
    error = response.json()["error"]
    assert (error["code"], error["current_version"], error["field"]) == ("conflict", 2, "if_version")
    assert memory_rows() == before
    assert api.get("profile", SPEAKER).json()["name"] == "Alice"
    assert _update(api, set={"name": "Alicia"}, if_version=2)["version"] == 3


@pytest.mark.parametrize("change", [{}, {"add_traits": []}, {"remove_traits": ["never had it"]}])
def test_an_empty_update_makes_no_profile_and_a_guarded_writer_still_holds(api, change):
    body = _update(api, **change)
    assert (body["version"], body["updated_at"], body["traits"]) == (0, None, [])
    profile_entries = AuditEntry.objects.filter(operation="profile_update")
    assert not (Profile.objects.exists() or ProfileVersion.objects.exists() or profile_entries.exists())
    assert _update(api, add_traits=["x"], if_version=0)["version"] == 1


def test_a_cut_that_changes_nothing_still_says_the_notes_were_cut(api):
    full = _update(api, set={"notes": "n" * 2000})
    body = _update(api, append_notes="more")
    assert (body["version"], body["adjusted"]) == (full["version"], ["notes"])


def test_it_refuses_an_if_version_that_is_no_version_number(api):
    assert api.post("profile", {**SPEAKER, "if_version": -1}).status_code == 422
    for beyond in (2**31, 1e300):  # no version can be that high: a bad request, not a conflict
        refused = api.post("profile", {**SPEAKER, "if_version": beyond})
        assert refused.status_code == 422 and refused.json()["error"]["field"] == "if_version", refused.content
    assert api.post("profile", {**SPEAKER, "if_version": "2"}).status_code == 400


def test_it_documents_the_new_fields_and_the_409():
    document = site.document()
    schemas = document["components"]["schemas"]
    remember = schemas["RememberRequest"]["properties"]
    assert "maximum" not in remember["importance"]["anyOf"][0] and "query_id" in remember
    assert {"importance", "adjusted"} <= set(schemas["RememberResponse"]["required"])
    update = schemas["ProfileUpdateRequest"]["properties"]
    assert {"append_notes", "if_version"} <= set(update)
    assert "maxLength" not in schemas["ProfileChanges"]["properties"]["notes"]["anyOf"][0]
    assert {"evicted", "adjusted"} <= set(schemas["ProfileUpdateResponse"]["required"])
    assert schemas["RecallRequest"]["properties"]["statuses"]["anyOf"][0].get("minItems") is None
    responses = document["paths"]["/profile"]["post"]["responses"]
    assert responses["409"] == {"$ref": "#/components/responses/Conflict"}
    conflict = document["components"]["responses"]["Conflict"]["content"]["application/json"]["schema"]
    assert conflict == {"$ref": "#/components/schemas/ConflictError"}
    assert "current_version" in schemas["ConflictDetail"]["required"]
    assert "409" not in document["paths"]["/remember"]["post"]["responses"]


def test_every_limit_is_measured_on_the_text_that_is_kept(api):
    limit = validation.max_content_chars()
    remembered = api.post("remember", {**SCOPE_A, "content": "  " + "x" * limit + "\n\n"})
    assert remembered.status_code == 201, remembered.content
    found = api.post("recall", {**SCOPE_A, "query": " " * 5 + "x" * validation.MAX_QUERY_CHARS + " "})
    assert found.status_code == 200, found.content
    body = _update(api, set={"name": " " + "n" * validation.MAX_PROFILE_NAME + " "}, add_traits=[" " + "t" * 200 + " "])
    assert (len(body["name"]), body["traits"]) == (validation.MAX_PROFILE_NAME, ["t" * 200])
    padded = api.post("remember", {**SCOPE_A, "content": "hi", "sender_id": " " + "u" * 255 + " "})
    assert padded.status_code == 201, padded.content
