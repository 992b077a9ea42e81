"""Explaining an answer from its snapshot (issue 18): replay it against today's memory (read-only,
with the reason for every change), and fix a memory it used, the reason kept in the audit log."""

from __future__ import annotations

import re

import pytest
from pytest_django.asserts import assertContains, assertNotContains

from memconsole.memory import editing, episodes, injection, replay
from memconsole.memory.models import AuditEntry, Episode, InjectionSnapshot
from memconsole.memory.usage_models import EpisodeUse

from .conftest import htmx

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("shipped_floor")]  # what a real bot sees

QUESTION = "When is my trip to Beijing?"


@pytest.fixture
def made(scope, keys, system):
    return injection.record_injection(keys, system, QUESTION, sender_id="u1", sender_name="Alice")


def trip(keys) -> Episode:
    return next(e for e in Episode.objects.filter(user_key=keys.user_key) if "Beijing" in e.content)


def changes(result) -> dict[str, tuple[str, str]]:
    return {row.content: (row.change, row.reason) for row in result.rows}


def test_a_replay_right_away_changes_nothing_and_records_nothing(made, keys, system):
    assert made.context["episodes"][0]["content"].startswith("I am planning a trip to Beijing")
    snapshots, uses, entries = InjectionSnapshot.objects.count(), EpisodeUse.objects.count(), AuditEntry.objects.count()
    result = replay.replay(keys, system, made.snapshot)
    assert result.unchanged and result.rows
    assert (InjectionSnapshot.objects.count(), EpisodeUse.objects.count(), AuditEntry.objects.count()) == (
        snapshots,
        uses,
        entries,
    )


def test_a_replay_says_what_changed_since_and_why(made, keys, system):
    episodes.archive(keys, system, [trip(keys).episode_id])
    newer = episodes.remember(keys, system, "My trip to Beijing is on the 14th of March", sender_id="u1").episode
    result = changes(replay.replay(keys, system, made.snapshot))
    assert result["I am planning a trip to Beijing next month"] == ("dropped", "archived")
    assert result[newer.content] == ("added", "new")


def test_an_edited_memory_is_named_as_edited(made, keys, system):
    editing.edit_episode(keys, system, trip(keys).episode_id, content="I am planning a business trip to Chengdu")
    result = changes(replay.replay(keys, system, made.snapshot))
    assert result == {"I am planning a business trip to Chengdu": ("same", "edited")}  # kept, but not as it was


def test_the_replay_page_shows_the_changes(viewer_client, url, scope, made, keys, system):
    episodes.archive(keys, system, [trip(keys).episode_id])
    detail = viewer_client.get(url("injection_detail", scope.pk, made.snapshot.snapshot_id))
    assertContains(detail, url("snapshot_replay", scope.pk, made.snapshot.snapshot_id))
    assertNotContains(detail, "Fix a memory this answer used")  # a viewer cannot change memory
    page = viewer_client.get(url("snapshot_replay", scope.pk, made.snapshot.snapshot_id))
    assertContains(page, "Replayed against today’s memory")
    assertContains(page, "archived since")
    fragment = viewer_client.get(url("snapshot_replay", scope.pk, made.snapshot.snapshot_id), **htmx())
    assertNotContains(fragment, "<html")


def test_fixing_a_memory_from_the_answer_archives_it_with_the_reason(operator_client, url, scope, made, keys):
    detail = operator_client.get(url("injection_detail", scope.pk, made.snapshot.snapshot_id))
    assertContains(detail, "Fix a memory this answer used")
    target = trip(keys)
    response = operator_client.post(
        url("snapshot_fix", scope.pk, made.snapshot.snapshot_id),
        {"episode_id": target.episode_id, "action": "archive", "reason": "the trip was cancelled"},
    )
    assert response.status_code == 302
    target.refresh_from_db()
    assert target.status == "archived"
    entry = AuditEntry.objects.filter(operation="archive", target_id=target.episode_id).latest("id")
    assert entry.payload["metadata"] == {
        "reason": "the trip was cancelled",
        "from_snapshot": made.snapshot.snapshot_id,
    }


def test_archiving_an_archived_memory_again_says_so_and_claims_nothing(operator_client, url, scope, made, keys):
    target = trip(keys)
    fix = url("snapshot_fix", scope.pk, made.snapshot.snapshot_id)
    first = operator_client.post(fix, {"episode_id": target.episode_id, "action": "archive", "reason": "wrong"})
    assertContains(operator_client.get(first["Location"]), "Archived: the bot will not use this memory again")
    entries = AuditEntry.objects.filter(operation="archive").count()

    again = operator_client.post(fix, {"episode_id": target.episode_id, "action": "archive", "reason": "wrong again"})

    assert again.status_code == 400
    assertContains(again, "This memory is already archived", status_code=400)
    assert "Archived: the bot will not use this memory again" not in again.content.decode()
    assert AuditEntry.objects.filter(operation="archive").count() == entries
    # Found by a console user: the panel went on offering "Archive it" for the archived memory.
    page = operator_client.get(url("injection_detail", scope.pk, made.snapshot.snapshot_id)).content.decode()
    assert "Now: Archived, importance" in page and '<option value="archive">' not in page


def test_lowering_importance_from_the_answer_is_an_audited_edit(operator_client, url, scope, made, keys):
    target = trip(keys)
    before = target.importance
    operator_client.post(
        url("snapshot_fix", scope.pk, made.snapshot.snapshot_id),
        {"episode_id": target.episode_id, "action": "lower_importance", "reason": "only a rumour"},
    )
    target.refresh_from_db()
    assert target.importance == before - 1
    entry = AuditEntry.objects.filter(operation="episode_edit", target_id=target.episode_id).latest("id")
    assert entry.payload["metadata"]["reason"] == "only a rumour"
    assert entry.payload["before"] == {"importance": before}


def test_the_same_lower_importance_form_sent_twice_lowers_it_once(operator_client, url, scope, made, keys):
    """Found by a user: a double click (or a resent form) lowered the importance twice, 3 -> 2 -> 1."""
    target = trip(keys)
    before = target.importance
    detail = operator_client.get(url("injection_detail", scope.pk, made.snapshot.snapshot_id)).content.decode()
    shown = re.search(
        rf'name="episode_id" value="{target.episode_id}">\s*<input type="hidden" name="version" value="(\d+)"', detail
    )
    assert shown, "the fix form carries the version it shows"
    posted = {
        "episode_id": target.episode_id,
        "action": "lower_importance",
        "reason": "only a rumour",
        "version": shown.group(1),
    }
    fix = url("snapshot_fix", scope.pk, made.snapshot.snapshot_id)

    assert operator_client.post(fix, posted).status_code == 302
    again = operator_client.post(fix, posted)

    assertContains(again, "This memory changed since the page was shown", status_code=409)
    target.refresh_from_db()
    assert target.importance == before - 1
    assert AuditEntry.objects.filter(operation="episode_edit", target_id=target.episode_id).count() == 1


def test_a_fix_needs_a_reason_an_injected_memory_and_the_right_role(
    operator_client, viewer_client, granted_client, url, scope, made, keys
):
    target = trip(keys)
    fix_url = url("snapshot_fix", scope.pk, made.snapshot.snapshot_id)
    no_reason = operator_client.post(fix_url, {"episode_id": target.episode_id, "action": "archive", "reason": " "})
    assert no_reason.status_code == 400
    not_used = next(e for e in Episode.objects.filter(user_key=keys.user_key) if "dumplings" in e.content)
    refused = operator_client.post(fix_url, {"episode_id": not_used.episode_id, "action": "archive", "reason": "x"})
    assertContains(refused, "That memory was not injected by this snapshot", status_code=400)
    assert (
        viewer_client.post(fix_url, {"episode_id": target.episode_id, "action": "archive", "reason": "x"}).status_code
        == 403
    )
    assert (
        granted_client.post(fix_url, {"episode_id": target.episode_id, "action": "archive", "reason": "x"}).status_code
        == 404
    )
    target.refresh_from_db()
    assert target.status == "active"


def test_a_refused_fix_keeps_the_page_and_what_was_typed(operator_client, url, scope, made, keys, system):
    target = trip(keys)
    editing.edit_episode(keys, system, target.episode_id, importance=1)
    fix_url = url("snapshot_fix", scope.pk, made.snapshot.snapshot_id)
    reason = "a rumour from the coffee machine"

    response = operator_client.post(
        fix_url, {"episode_id": target.episode_id, "action": "lower_importance", "reason": reason}
    )

    page = response.content.decode()
    assert response.status_code == 400 and "Fix a memory this answer used" in page  # the snapshot's own page
    assert "already has the lowest importance; archive it instead" in page and 'id="fix-error"' in page
    assert f'value="{reason}"' in page and '<option value="archive">' in page
    assert '<option value="lower_importance"' not in page  # no longer offered at the lowest importance
    too_long = operator_client.post(
        fix_url, {"episode_id": target.episode_id, "action": "archive", "reason": "x" * 501}
    )
    assert too_long.status_code == 400 and "Fix a memory this answer used" in too_long.content.decode()
