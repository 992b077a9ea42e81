"""Memory health (issue 18): a space's Health tab and a bot's page draw what injections and memory
changes did per day as SVG bar charts, list the most- and never-used memories, and give the numbers
as CSV. Counting a use happens in `inject` only; viewing memory in the console is no use."""

from __future__ import annotations

import csv
import io
import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from pytest_django.asserts import assertContains, assertNotContains

from memconsole.memory import episodes, injection, timetravel, usage
from memconsole.memory.models import Episode

from .conftest import htmx

pytestmark = pytest.mark.django_db


def csv_rows(response) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_a_use_is_counted_per_injection_and_never_by_looking(viewer_client, url, scope, keys, system):
    first = injection.record_injection(keys, system, "Where am I travelling next month?", sender_id="u1")
    injection.record_injection(keys, system, "When is my Beijing trip?", sender_id="u1")
    used_id = first.context["episodes"][0]["episode_id"]
    viewer_client.get(url("episode_detail", scope.pk, used_id))
    viewer_client.get(url("episodes", scope.pk))
    found = usage.episode_usage(keys, used_id)
    assert found.uses == 2
    assert found.last_used_at is not None
    assert first.snapshot in found.snapshots


def test_the_health_tab_charts_today_and_lists_used_and_unused_memories(
    viewer_client, url, scope, keys, system, shipped_floor
):
    made = injection.record_injection(keys, system, "Where am I travelling next month?", sender_id="u1")
    injection.record_injection(keys, system, "quantum chromodynamics lecture schedule", sender_id="u1")
    used_id = made.context["episodes"][0]["episode_id"]
    used_content = Episode.objects.get(episode_id=used_id).content

    response = viewer_client.get(url("insights", scope.pk))
    assertContains(response, "<svg", count=6)
    assertContains(response, 'aria-current="page">Health</a>')
    assertContains(response, "Injections per day")
    assertContains(response, used_content)
    assertContains(response, "used once")
    assertContains(response, "Never used")

    rows = csv_rows(viewer_client.get(url("insights_csv", scope.pk)))
    assert len(rows) == 30  # one per day of the default period, today last
    today = rows[-1]
    assert today["day"] == timezone.localdate().isoformat()
    assert int(today["injections"]) == 2
    assert int(today["stored"]) == Episode.objects.filter(user_key=keys.user_key).count()
    assert int(today["without_memory"]) == 1  # the lecture question is below the relevance floor


def test_archived_and_superseded_memories_count_on_their_day(viewer_client, url, scope, keys, system):
    target = Episode.objects.filter(user_key=keys.user_key, status="active").first()
    episodes.archive(keys, system, [target.episode_id])
    episodes.remember(keys, system, "Alice lives in Berlin, not Paris", sender_id="u1", tags=["correction"])
    today = csv_rows(viewer_client.get(url("insights_csv", scope.pk, query="days=7")))[-1]
    assert int(today["archived"]) == 2  # the fixture archived one today too
    assert int(today["superseded"]) == Episode.objects.filter(user_key=keys.user_key, status="superseded").count()


def test_a_bots_page_covers_its_spaces_only(viewer_client, url, scope, other_scope, keys, other_keys, system):
    injection.record_injection(keys, system, "Where am I travelling next month?", sender_id="u1")
    injection.record_injection(other_keys, system, "blue door", sender_id="u9")
    bot_a = csv_rows(viewer_client.get(url("bot_insights_csv", query="bot=bot-a")))
    assert sum(int(row["injections"]) for row in bot_a) == 1
    page = viewer_client.get(url("bot_insights", query="bot=bot-a"))
    assertContains(page, "Memory health of bot bot-a")
    assertNotContains(page, "Bot B remembers the blue door")
    assert viewer_client.get(url("bot_insights", query="bot=no-such-bot")).status_code == 404


def test_a_user_limited_to_another_bot_sees_nothing_of_this_one(granted_client, url, scope, other_scope):
    assert granted_client.get(url("insights", scope.pk)).status_code == 404
    assert granted_client.get(url("bot_insights", query="bot=bot-a")).status_code == 404
    assert granted_client.get(url("bot_insights_csv", query="bot=bot-a")).status_code == 404
    assert granted_client.get(url("bot_insights", query="bot=bot-b")).status_code == 200


def test_the_period_is_chosen_and_a_bad_one_falls_back(viewer_client, url, scope):
    assert len(csv_rows(viewer_client.get(url("insights_csv", scope.pk, query="days=7")))) == 7
    assert len(csv_rows(viewer_client.get(url("insights_csv", scope.pk, query="days=abc")))) == 30
    assert len(csv_rows(viewer_client.get(url("insights_csv", scope.pk, query="days=100000")))) == 30
    fragment = viewer_client.get(url("insights", scope.pk, query="days=7"), **htmx())
    assertContains(fragment, "the last 7 days")
    assertNotContains(fragment, "<html")


def test_what_the_bot_knew_at_a_moment_and_what_changed_since(viewer_client, url, scope, keys, system):
    time.sleep(1)  # the form's precision is a second
    then = timezone.localtime().strftime("%Y-%m-%dT%H:%M:%S")
    page = viewer_client.get(url("known_at", scope.pk))
    assertContains(page, "What did the bot know?")
    assertNotContains(page, "Known at")  # nothing asked yet
    time.sleep(1)
    episodes.remember(keys, system, "Alice adopted a cat named Mochi", sender_id="u1", sender_name="Alice")
    time.sleep(1)
    now = timezone.localtime().strftime("%Y-%m-%dT%H:%M:%S")
    answer = viewer_client.get(url("known_at", scope.pk, query=f"at={now}&compare={then}"))
    assertContains(answer, "Learned")
    assertContains(answer, "Alice adopted a cat named Mochi")
    assertContains(answer, "I am planning a trip to Beijing next month")


def test_a_long_list_of_what_the_bot_knew_says_it_is_cut_and_compares_in_full(
    viewer_client, url, scope, keys, system, monkeypatch
):
    """Found by a user of a large space: the list stopped at 500 without a word, and the comparison
    of two cut lists named memories as gone that were still active."""
    monkeypatch.setattr(timetravel, "SHOWN", 3)
    for n in range(6):
        episodes.remember(keys, system, f"memory number {n} about the garden", sender_id="u1")
    time.sleep(1)
    then = timezone.localtime().strftime("%Y-%m-%dT%H:%M:%S")
    time.sleep(1)
    episodes.remember(keys, system, "Alice adopted a cat named Mochi", sender_id="u1")
    time.sleep(1)
    now = timezone.localtime().strftime("%Y-%m-%dT%H:%M:%S")

    answer = viewer_client.get(url("known_at", scope.pk, query=f"at={now}&compare={then}"))

    total = Episode.objects.filter(status="active").count()
    assertContains(answer, f"The newest 3 of {total} are listed.")
    assertContains(answer, f"{total} active memories")
    page = answer.content.decode()
    assert "Alice adopted a cat named Mochi" in page
    assert "No longer known" not in page  # nothing went: the lists compared are whole, not the listed 3


def test_time_travel_refuses_the_future_and_other_peoples_spaces(viewer_client, granted_client, url, scope):
    future = (timezone.localtime() + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    refused = viewer_client.get(url("known_at", scope.pk, query=f"at={future}"))
    assert refused.status_code == 400
    assertContains(refused, "Choose a moment in the past.", status_code=400)
    assert viewer_client.get(url("known_at", scope.pk, query="at=yesterday")).status_code == 400
    assert granted_client.get(url("known_at", scope.pk)).status_code == 404
    fragment = viewer_client.get(url("known_at", scope.pk, query="at="), **htmx())
    assertContains(fragment, "Known at")
    assertNotContains(fragment, "<html")
    # Found by a console user: this heading said "June 1, 2026, noon" with no zone, unlike every other time.
    assert re.search(
        r'<h3>Known at <time datetime="[^"]+" title="[^"]+ UTC">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time></h3>',
        fragment.content.decode(),
    )


def test_an_episodes_page_says_which_answers_used_it(viewer_client, url, scope, keys, system):
    made = injection.record_injection(keys, system, "Where am I travelling next month?", sender_id="u1", top_k=1)
    used_id = made.context["episodes"][0]["episode_id"]
    page = viewer_client.get(url("episode_detail", scope.pk, used_id))
    assertContains(page, "Injected once")
    assertContains(page, url("injection_detail", scope.pk, made.snapshot.snapshot_id))
    unused = Episode.objects.filter(user_key=keys.user_key).exclude(episode_id=used_id).first()
    assertContains(viewer_client.get(url("episode_detail", scope.pk, unused.episode_id)), "No injection has used")
