"""The Erasure screen: count what erasing a speaker would remove, confirm by typing the id again,
erase (audited receipt), for unrestricted admins everywhere and for granted admins within their bots."""

from __future__ import annotations

import pytest
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from memconsole.lib import vectors
from memconsole.memory import facts, window
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.models import AuditEntry, BotGrant, Episode, InjectionSnapshot, Profile, ProfileVersion
from memconsole.memory.validation import MAX_SENDER_CHARS
from tests.factories import plain_episodes, profile
from tests.jobs.work import follow_job

from .conftest import htmx

pytestmark = pytest.mark.django_db

ERASE_U7_IN_B = {"sender_id": "u7", "bot_uuid": "bot-b", "confirmation": "u7"}
TABLES = (Episode, Profile, ProfileVersion, AuditEntry, InjectionSnapshot)


def row_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in TABLES}


@pytest.fixture
def speaker_in_two_bots(db, keys, other_keys) -> str:
    """Speaker u7 with episodes in bot-a and bot-b and a profile in bot-a; no vectors (counting,
    refusing and validating never touch the index)."""
    for scope_keys, sender_id, n in ((keys, "u7", 2), (other_keys, "u7", 1), (keys, "u8", 1)):
        plain_episodes(scope_keys, n, sender_id=sender_id)
    profile(keys, "u7", name="Seven", traits=["tall"])
    return "u7"


@pytest.fixture
def granted_admin_client(client_for, admin_user) -> Client:
    """An admin limited to bot-b."""
    BotGrant.objects.create(user=admin_user, bot_uuid="bot-b")
    client = client_for(admin_user)
    return client


def test_it_sends_anonymous_users_to_the_login_page(client, url):
    for response in (
        client.get(url("erasure")),
        client.post(url("erasure"), {"sender_id": "u7"}),
        client.post(url("erasure_run"), {"sender_id": "u7", "confirmation": "u7"}),
    ):
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("who", ["viewer_client", "operator_client"])
def test_it_refuses_the_erasure_to_viewers_and_operators(request, url, speaker_in_two_bots, who):
    client = request.getfixturevalue(who)
    before = row_counts()
    assert client.get(url("erasure")).status_code == 403
    assert client.post(url("erasure"), {"sender_id": "u7"}).status_code == 403
    assert client.post(url("erasure_run"), {"sender_id": "u7", "confirmation": "u7"}).status_code == 403
    assert row_counts() == before
    assertNotContains(client.get(url("overview")), f'href="{url("erasure")}"')


def test_it_shows_the_form_to_admins_and_links_it_from_the_header(admin_client_, url):
    response = admin_client_.get(url("erasure"))
    page = response.content.decode()
    assert (
        '<label for="id_sender_id">Speaker ID</label>' in page and '<label for="id_bot_uuid">Bot UUID</label>' in page
    )
    assertContains(response, '<button type="submit">Count what would be erased</button>')
    assert f'action="{url("erasure")}"' in page and f'hx-post="{url("erasure")}"' in page
    assertContains(admin_client_.get(url("overview")), f'<a href="{url("erasure")}">Erasure</a>')


@pytest.mark.parametrize(("method", "name"), [("put", "erasure"), ("delete", "erasure"), ("get", "erasure_run")])
def test_it_answers_405_to_the_wrong_method(admin_client_, url, method, name):
    assert getattr(admin_client_, method)(url(name)).status_code == 405


@pytest.mark.parametrize("sender_id", ["", "   ", "x" * (MAX_SENDER_CHARS + 1), "u\x007"])
@pytest.mark.parametrize("name", ["erasure", "erasure_run"])
def test_it_answers_400_with_an_inline_error_to_a_bad_speaker_id(
    admin_client_, url, speaker_in_two_bots, name, sender_id
):
    before = row_counts()
    response = admin_client_.post(url(name), {"sender_id": sender_id, "confirmation": sender_id})
    assert response.status_code == 400
    page = response.content.decode()
    assert '<p class="field-error" id="id_sender_id_error">' in page and 'aria-invalid="true"' in page
    assert row_counts() == before


def test_it_answers_400_to_a_bot_uuid_the_domain_rejects(admin_client_, url, speaker_in_two_bots):
    response = admin_client_.post(url("erasure"), {"sender_id": "u7", "bot_uuid": "bot:a"})
    assert response.status_code == 400 and b"bot_uuid may not contain" in response.content


def test_it_counts_what_would_be_erased_without_writing_anything(admin_client_, url, speaker_in_two_bots):
    before = row_counts()
    response = admin_client_.post(url("erasure"), {"sender_id": "u7"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "<dt>Episodes</dt><dd>3</dd>" in page and "<dt>Speaker profiles</dt><dd>1</dd>" in page
    assert "<dt>Memory spaces</dt><dd>2</dd>" in page and "<dd>every bot</dd>" in page
    assert "<dt>Audit entries redacted</dt><dd>1</dd>" in page  # the profile change
    assertContains(response, "Dry run: nothing has been erased yet.")
    assert f'action="{url("erasure_run")}"' in page and 'hx-confirm="Erase speaker u7 permanently?' in page
    assertContains(response, '<input type="hidden" name="sender_id" value="u7"')
    assertContains(response, '<label for="id_confirmation">Type the speaker ID again to confirm</label>')
    assertContains(response, '<button type="submit" class="danger">Erase permanently</button>')
    assert row_counts() == before


def test_it_says_when_there_is_nothing_to_erase(admin_client_, url, speaker_in_two_bots):
    response = admin_client_.post(url("erasure"), {"sender_id": "nobody"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "Nothing was found for this speaker ID" in page and "Erase permanently" not in page


def test_it_refuses_a_confirmation_that_does_not_match(admin_client_, url, speaker_in_two_bots):
    before = row_counts()
    response = admin_client_.post(url("erasure_run"), {"sender_id": "u7", "bot_uuid": "", "confirmation": "u8"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "This does not match the speaker ID." in page and "<dt>Episodes</dt><dd>3</dd>" in page
    assert row_counts() == before


def test_it_erases_the_speaker_writes_the_receipt_and_keeps_the_chain_verifiable(
    admin_client_, url, keys, scope_with_episodes, system
):
    profile(keys, "u1", name="Alice")
    erased = {e.episode_id for e in scope_with_episodes if e.sender_id == "u1"}
    assert erased <= set(vectors.all_ids(keys.user_key))
    response = admin_client_.post(url("erasure_run"), {"sender_id": "u1", "bot_uuid": "bot-a", "confirmation": "u1"})
    assert response.status_code == 302 and Episode.objects.filter(sender_id="u1").exists()  # queued as a job
    assert "u1" not in response["Location"]
    response = follow_job(admin_client_, response)
    assert response.status_code == 200
    page = response.content.decode()
    receipt = AuditEntry.objects.get(operation="erase_subject")
    assert receipt.actor == "user:admin" and receipt.payload["metadata"]["episodes"] == 2
    assert receipt.payload["metadata"]["profiles"] == 1 and receipt.payload["metadata"]["bot_uuid"] == "bot-a"
    assert "The speaker was erased." in page and f"<code>{receipt.audit_id}</code>" in page
    assertContains(response, "<dt>Episodes</dt><dd>2</dd>")
    assert not Episode.objects.filter(sender_id="u1").exists()
    assert not Profile.objects.filter(sender_id="u1").exists()
    assert Episode.objects.filter(sender_id="u2").count() == 2
    assert not erased & set(vectors.all_ids(keys.user_key))
    assert verify_audit_chain().ok


@pytest.mark.parametrize("name", ["erasure", "erasure_run"])
def test_it_keeps_a_granted_admin_within_their_bots(granted_admin_client, url, speaker_in_two_bots, name):
    before = row_counts()
    data = {"sender_id": "u7", "confirmation": "u7"}
    assert granted_admin_client.post(url(name), {**data, "bot_uuid": "bot-a"}).status_code == 404
    assert granted_admin_client.post(url(name), {**data, "bot_uuid": ""}).status_code == 403
    assert granted_admin_client.post(url(name), data).status_code == 403
    assert row_counts() == before


@pytest.mark.parametrize("name", ["erasure", "erasure_run"])
def test_it_names_no_speaker_of_a_bot_outside_a_granted_admins_bots(granted_admin_client, url, keys, name):
    for sender_id in ("secret-x1", "secret-x2"):
        plain_episodes(keys, 1, sender_id=sender_id, sender_name="Shadowperson")
    data = {"sender_id": "Shadowperson", "bot_uuid": "bot-a", "confirmation": "Shadowperson"}
    response = granted_admin_client.post(url(name), data)
    assert response.status_code == 404
    assertNotContains(response, "secret-x1", status_code=404)


def test_a_granted_admin_reads_the_receipt_of_their_own_erasure(granted_admin_client, url, speaker_in_two_bots):
    response = follow_job(granted_admin_client, granted_admin_client.post(url("erasure_run"), ERASE_U7_IN_B))
    assert response.status_code == 200
    receipt = AuditEntry.objects.get(operation="erase_subject")
    page = granted_admin_client.get("/audit/", {"operation": "erase_subject"}).content.decode()
    assert "erased a person: 1 episode, 0 profiles" in page  # found by a user: "1 episodes", "1 profiles"
    assert receipt.chain == "" and verify_audit_chain().ok


def test_it_lets_a_granted_admin_count_within_a_granted_bot(granted_admin_client, url, speaker_in_two_bots):
    response = granted_admin_client.get(url("erasure"))
    assert response.status_code == 200
    page = response.content.decode()
    assert '<select name="bot_uuid"' in page and '<option value="bot-b">bot-b</option>' in page and "bot-a" not in page
    response = granted_admin_client.post(url("erasure"), {"sender_id": "u7", "bot_uuid": "bot-b"})
    page = response.content.decode()
    assert "<dt>Episodes</dt><dd>1</dd>" in page and "<code>bot-b</code>" in page
    assertContains(response, '<input type="hidden" name="bot_uuid" value="bot-b"')


def test_it_answers_htmx_with_the_fragment_only(admin_client_, url, speaker_in_two_bots):
    for response in (
        admin_client_.get(url("erasure"), **htmx("erasure")),
        admin_client_.post(url("erasure"), {"sender_id": "u7", "bot_uuid": "bot-b"}, **htmx("erasure")),
        admin_client_.post(url("erasure"), {"sender_id": ""}, **htmx("erasure")),
    ):
        html = response.content.decode()
        assert html.lstrip().startswith('<div id="erasure"') and "<html" not in html
        assert response["Vary"].count("HX-Request") == 1 and "no-cache" in response["Cache-Control"]


def test_it_answers_an_htmx_erasure_with_the_receipt_fragment(admin_client_, url, other_scope):
    response = admin_client_.post(
        url("erasure_run"), {"sender_id": "u9", "bot_uuid": "bot-b", "confirmation": "u9"}, **htmx("erasure")
    )
    assert response.status_code == 200 and "/jobs/" in response["HX-Redirect"]
    response = follow_job(admin_client_, response, **htmx("job"))
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<div id="job"') and "<html" not in html
    assert '<div id="erasure"' in html
    assert "The speaker was erased." in html and not Episode.objects.filter(sender_id="u9").exists()


def test_it_enforces_csrf_on_both_posts(client_for, admin_user, url, speaker_in_two_bots):
    client = client_for(admin_user, enforce_csrf_checks=True)
    before = row_counts()
    assert client.post(url("erasure"), {"sender_id": "u7"}).status_code == 403
    assert client.post(url("erasure_run"), {"sender_id": "u7", "confirmation": "u7"}).status_code == 403
    assert row_counts() == before
    assert Episode.objects.filter(sender_id="u7").count() == 3


def test_it_counts_and_erases_a_person_known_only_by_window_messages_and_facts(admin_client_, url, keys, system):
    # "Nothing was found for this speaker ID" for a person whose passport number sat in the chat window
    window.append_message(keys, system, "user", "my passport number is X1234567", sender_id="ghost2")
    facts.remember_fact(keys, system, "ghost2", "city", "Oslo")
    page = admin_client_.post(url("erasure"), {"sender_id": "ghost2"}).content.decode()
    assert "Nothing was found" not in page and "Erase permanently" in page
    assert "<dt>Facts</dt><dd>1</dd>" in page and "<dt>Window messages</dt><dd>1</dd>" in page
    assert "<dt>Memory spaces</dt><dd>1</dd>" in page  # the space of their facts and messages
    data = {"sender_id": "ghost2", "bot_uuid": "", "confirmation": "ghost2"}
    receipt = follow_job(admin_client_, admin_client_.post(url("erasure_run"), data)).content.decode()
    assert "<dt>Facts</dt><dd>1</dd>" in receipt and "<dt>Window messages</dt><dd>1</dd>" in receipt
    assert not window.recent_messages(keys) and not facts.speaker_facts(keys.user_key, "ghost2")
