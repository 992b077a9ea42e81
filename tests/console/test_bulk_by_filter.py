"""Bulk by filter (issue 17): "Select all N that match", a preview listing the first 50 episodes and
the total, and a run that is one audited batch whose id groups its entries in the audit log."""

from __future__ import annotations

import re

import pytest

from memconsole.memory import audit, bulk, episodes, jobs
from memconsole.memory.models import AuditEntry, Episode, EpisodeCounts, Scope
from memconsole.memory.scopes import derive_scope
from tests.factories import plain_episodes
from tests.jobs.work import follow_job

from .conftest import htmx

pytestmark = pytest.mark.django_db


def page_text(response, status: int = 200) -> str:
    assert response.status_code == status, response.status_code
    return response.content.decode()


@pytest.fixture
def many(light_scope, keys):
    """60 episodes of importance 5 beside the fixture's three of importance 2."""
    return plain_episodes(keys, 60, importance=5, start=100)


def post_matching(client, url, scope, action, query, **extra):
    data = {"action": action, "select": "matching", "filter_query": query, **extra}
    return client.post(url("episodes_bulk", scope.pk), data, **htmx("bulk-result"))


def test_the_bulk_bar_offers_every_episode_that_matches(operator_client, url, light_scope, many):
    page = page_text(operator_client.get(url("episodes", light_scope.pk), {"importance": "5", "limit": 10}))
    assert 'name="select" value="matching"' in page and "Select all 60 that match…" in page
    assert 'name="filter_query" value="importance=5&amp;limit=10"' in page


def test_the_preview_lists_the_first_50_and_the_total_before_anything_runs(operator_client, url, light_scope, many):
    html = page_text(post_matching(operator_client, url, light_scope, "archive", "importance=5"))
    assert "<html" not in html and "60 episodes match; 60 will be archived." in html
    assert "The first 50 of 60:" in html
    listed = re.findall(r"<li><code>([0-9a-f]{12})</code>", html)
    assert len(listed) == 50 and listed[0] == many[-1].episode_id  # newest stored first
    assert 'name="expected" value="60"' in html and 'name="select" value="matching"' in html
    assert Episode.objects.filter(status="archived").count() == 0  # a preview changes nothing
    # Found by a console user: 735 episodes took 15 s with Confirm still clickable and no word of progress.
    assert 'hx-disabled-elt="find button" hx-indicator="#bulk-working"' in html
    assert "Working on 60 episodes: this can take a minute for thousands." in html


def test_the_confirmed_run_is_one_audited_batch(operator_client, url, light_scope, many, keys):
    response = post_matching(operator_client, url, light_scope, "archive", "importance=5", confirmed="1", expected="60")
    html = page_text(response)
    assert "60 episodes archived." in html
    entries = list(AuditEntry.objects.filter(operation="archive"))
    batch_ids = {entry.batch_id for entry in entries}
    assert len(entries) == 60 and len(batch_ids) == 1 and "" not in batch_ids
    (batch_id,) = batch_ids
    assert all(entry.payload["batch_id"] == batch_id for entry in entries)  # covered by the chain
    assert f"?batch={batch_id}" in html
    assert audit.verify_audit_chain().ok
    assert EpisodeCounts.objects.get(user_key=keys.user_key).archived == 60
    assert Episode.objects.filter(importance=2, status="active").count() == 3  # not matched, not touched


def test_a_run_whose_matches_changed_since_the_preview_previews_again(operator_client, url, light_scope, many):
    html = page_text(
        post_matching(operator_client, url, light_scope, "archive", "importance=5", confirmed="1", expected="59")
    )
    assert "changed since the preview" in html and "60 episodes match; 60 will be archived." in html
    assert not AuditEntry.objects.filter(operation="archive").exists()


def test_the_audit_log_shows_a_bulk_action_as_one_batch(admin_client_, url, light_scope, many):
    post_matching(admin_client_, url, light_scope, "delete", "importance=5", confirmed="1", expected="60")
    batch_id = AuditEntry.objects.filter(operation="delete").first().batch_id
    page = page_text(admin_client_.get(url("audit_all")))
    assert page.count('class="batch-link"') == 1 and "One bulk action of 60 entries: show them all" in page
    assert page.count("<code>delete</code>") == 1  # the 25 newest entries folded into one row
    only = page_text(admin_client_.get(url("audit_all"), {"batch": batch_id}))
    assert only.count("<code>delete</code>") == 25 and 'class="batch-link"' not in only
    assert f'value="{batch_id}"' in only  # the filter shows in the form
    scoped = page_text(admin_client_.get(url("audit", light_scope.pk), {"batch": batch_id}, **htmx("audit-list")))
    assert "<html" not in scoped and scoped.count("<code>delete</code>") == 25
    assert admin_client_.get(url("audit_all"), {"batch": "not-a-batch"}).status_code == 400


def test_a_bulk_delete_preview_says_what_the_audit_log_keeps(admin_client_, url, light_scope, many):
    html = page_text(post_matching(admin_client_, url, light_scope, "delete", "importance=5"))
    assert "60 episodes match; 60 will be deleted for good." in html
    assert "The audit log keeps a copy of each (its before-image) unless the person is later erased." in html


def test_roles_and_scopes_are_enforced(viewer_client, operator_client, granted_client, url, light_scope, many):
    assert post_matching(viewer_client, url, light_scope, "archive", "importance=5").status_code == 403
    assert post_matching(operator_client, url, light_scope, "delete", "importance=5").status_code == 403
    assert post_matching(granted_client, url, light_scope, "archive", "importance=5").status_code == 404


def test_a_viewer_is_refused_before_the_form_is_read(viewer_client, url, light_scope, many):
    """Found by a user: a viewer's malformed bulk post was answered 400 (the form) before 403."""
    response = viewer_client.post(url("episodes_bulk", light_scope.pk), {"action": "no-such-action"})
    assert response.status_code == 403


def test_bad_filters_are_a_400_with_the_reason(operator_client, url, light_scope, many):
    html = page_text(post_matching(operator_client, url, light_scope, "archive", "importance=9"), 400)
    assert "filters are not valid" in html


def test_a_run_is_bounded_and_says_so(operator_client, url, light_scope, many, monkeypatch):
    monkeypatch.setattr(bulk, "MAX_BY_FILTER", 20)
    monkeypatch.setattr(bulk, "CHUNK", 7)
    html = page_text(post_matching(operator_client, url, light_scope, "archive", "importance=5"))
    assert "20 episodes match; 20 will be archived." in html and "run it again for the rest" in html
    post_matching(operator_client, url, light_scope, "archive", "importance=5", confirmed="1", expected="20")
    entries = AuditEntry.objects.filter(operation="archive")
    assert entries.count() == 20 and entries.values("batch_id").distinct().count() == 1  # 3 chunks, 1 batch


def test_bulk_by_filter_works_without_javascript(operator_client, url, light_scope, many):
    data = {"action": "restore", "select": "matching", "filter_query": "status=all&importance=5", "next": "/x"}
    page = page_text(operator_client.post(url("episodes_bulk", light_scope.pk), data))
    assert "<html" in page and "60 episodes match; 0 will be restored." in page
    data.update(confirmed="1", expected="60")
    response = operator_client.post(url("episodes_bulk", light_scope.pk), data)
    assert response.status_code == 302


def test_a_speaker_typed_as_a_name_selects_the_same_rows_as_the_list(operator_client, url, light_scope, keys, many):
    plain_episodes(keys, 4, sender_id="u8", sender_name="Quentin", start=300)
    html = page_text(post_matching(operator_client, url, light_scope, "archive", "sender=Quentin"))
    assert "4 episodes match; 4 will be archived." in html


def test_a_bot_wide_bulk_action_counts_this_chats_part_on_its_audit_tab(admin_client_, url, system):
    """Found by a user: in a bot-isolated space the link promised the whole batch (77) and showed
    this chat's 22. The count is what the link shows."""
    first, second = derive_scope("bot-a", "group_1", "bot"), derive_scope("bot-a", "group_2", "bot")
    made = [
        episodes.remember(space, system, f"note {n}", sender_id="u1").episode
        for n in range(3)
        for space in (first, second)
    ]
    mine = sum(1 for episode in made if episode.scope_key == first.scope_key)
    with audit.batch():
        episodes.archive(first, system, [episode.episode_id for episode in made])
    scope = Scope.objects.get(scope_key=first.scope_key, isolation="bot")

    page = page_text(admin_client_.get(url("audit", scope.pk)))

    assert f"One bulk action of {mine} entries: show them all" in page


def test_a_run_of_more_than_one_chunk_is_a_job_with_progress(operator_client, url, light_scope, many, monkeypatch):
    # 5,000 episodes took over 30 s in one request, with no word of progress and a worker timeout near
    monkeypatch.setattr(bulk, "IN_BACKGROUND_ABOVE", 25)
    monkeypatch.setattr(bulk, "CHUNK", 25)
    next_url = f"{url('episodes', light_scope.pk)}?importance=5"
    response = post_matching(
        operator_client, url, light_scope, "archive", "importance=5", confirmed="1", expected="60", next=next_url
    )
    assert not AuditEntry.objects.filter(operation="archive").exists()  # queued, not yet run
    page = page_text(follow_job(operator_client, response))
    job = jobs.Job.objects.get(kind=jobs.BULK)
    assert (job.status, job.done, job.total) == ("succeeded", 60, 60)
    assert "60 episodes archived." in page and f'href="{next_url.replace("&", "&amp;")}"' in page
    entries = AuditEntry.objects.filter(operation="archive")
    assert entries.count() == 60 and set(entries.values_list("batch_id", flat=True)) == {job.pk.hex}
    assert f"?batch={job.pk.hex}" in page and audit.verify_audit_chain().ok
    assert Episode.objects.filter(importance=5, status="archived").count() == 60


def test_a_bulk_job_run_again_or_after_a_bot_deleted_some_does_what_is_left_in_one_batch(
    admin_client_, url, light_scope, many, keys, system, monkeypatch
):
    monkeypatch.setattr(bulk, "IN_BACKGROUND_ABOVE", 25)
    monkeypatch.setattr(bulk, "CHUNK", 25)
    response = post_matching(admin_client_, url, light_scope, "delete", "importance=5", confirmed="1", expected="60")
    job = jobs.Job.objects.get(kind=jobs.BULK)
    ids = job.params["episode_ids"]
    episodes.delete(keys, system, ids[:1])  # a bot deletes one after the confirmation
    bulk.run(keys, system, "delete", ids[1:30], batch_id=job.pk.hex)  # an attempt whose worker then stopped
    page = page_text(follow_job(admin_client_, response))
    assert "59 episodes deleted." in page  # the batch's count, both attempts together; nothing refused
    assert not Episode.objects.filter(importance=5).exists()
    assert AuditEntry.objects.filter(batch_id=job.pk.hex, operation="delete").count() == 59


def test_one_bulk_job_at_a_time_per_memory_space_and_nothing_at_once_beside_it(
    operator_client, url, system, monkeypatch
):
    # two chats sharing a bot's memory each started a job on the same episodes; the second "archived 0"
    monkeypatch.setattr(bulk, "IN_BACKGROUND_ABOVE", 5)
    first, second = derive_scope("bot-a", "group_1", "bot"), derive_scope("bot-a", "group_2", "bot")
    for space in (first, second):
        for n in range(4):
            episodes.remember(space, system, f"note {n} of {space.scope_key}", sender_id="u1", importance=5)
    scopes = [Scope.objects.get(scope_key=space.scope_key, isolation="bot") for space in (first, second)]
    started = post_matching(operator_client, url, scopes[0], "archive", "importance=5", confirmed="1", expected="8")
    assert "/jobs/" in started["HX-Redirect"]
    refused = post_matching(operator_client, url, scopes[1], "archive", "importance=5", confirmed="1", expected="8")
    assert refused.status_code == 409 and jobs.Job.objects.filter(kind=jobs.BULK).count() == 1
    monkeypatch.setattr(bulk, "IN_BACKGROUND_ABOVE", 500)  # a run small enough to answer at once
    at_once = post_matching(operator_client, url, scopes[1], "restore", "status=all", confirmed="1", expected="8")
    assert at_once.status_code == 409 and not AuditEntry.objects.filter(operation="restore").exists()
