"""Write-behind indexing (issue 22): `remember` commits the episode with its vector and returns; the
indexer writes the vector later (memory/pending.py, memory/indexer.py). Until then recall, inject
and the supersede check find the episode from its pending vector, within its scope only. Real
database, real embedded Chroma; MEMCONSOLE_INDEXER=worker with no worker running keeps vectors
pending for as long as a test needs, and the thread mode's own thread is tested with a long delay."""

from __future__ import annotations

import time
from datetime import timedelta

import numpy as np
import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from memconsole.jobs.collectors import JobCollector
from memconsole.lib import embeddings, vectors
from memconsole.memory import episodes, indexer, injection, pending, retrieval
from memconsole.memory.batch_remember import remember_many
from memconsole.memory.health.backlog import check_index_backlog
from memconsole.memory.models import Episode
from memconsole.memory.pending_models import PendingVector
from memconsole.memory.reindex import reindex

pytestmark = pytest.mark.django_db(transaction=True)

ABOVE = ("The project deadline is Friday", "The project deadline is next Monday")  # ≈ 0.887: supersedes


@pytest.fixture
def behind(settings):
    """Write-behind with nothing draining in this process (the job worker would, and is not running)."""
    settings.MEMCONSOLE_INDEXER = "worker"
    yield settings
    indexer.stop(flush=False)


@pytest.fixture
def threaded(settings):
    """MEMCONSOLE_INDEXER=thread with a delay longer than any test: the thread drains at its start only."""
    settings.MEMCONSOLE_INDEXER = "thread"
    settings.MEMCONSOLE_INDEX_DELAY_MS = 600_000
    started = indexer.ensure_started()
    assert started.first_pass.wait(60)
    yield started
    indexer.stop(flush=False)


def in_index(keys, episode_id: str) -> bool:
    return episode_id in set(vectors.all_ids(keys.user_key))


def recalled(keys, query: str, **options) -> list[str]:
    return [hit.episode.episode_id for hit in retrieval.recall(keys, query, top_k=5, **options)]


def wait_until(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


# --- read-your-writes ---------------------------------------------------------------------------


def test_recall_right_after_remember_finds_the_episode_the_thread_has_not_indexed_yet(threaded, keys, system):
    episodes.remember(keys, system, "Alice is allergic to peanuts", sender_id="u1")
    result = episodes.remember(keys, system, "Bob keeps bees on his roof", sender_id="u2")

    assert result.indexed  # searchable now; the index follows
    assert PendingVector.objects.filter(episode=result.episode).exists()
    assert not in_index(keys, result.episode.episode_id)
    assert recalled(keys, "who keeps bees?")[0] == result.episode.episode_id
    hit = retrieval.recall(keys, "who keeps bees?")[0]
    assert hit.breakdown.similarity > 0.5  # its exact vector similarity, not a lexical guess
    injected = injection.record_injection(keys, system, "who keeps bees?", sender_id="u2")
    assert result.episode.episode_id in [hit.episode.episode_id for hit in injected.hits]


def test_pending_search_keeps_to_the_scope_and_the_filters(behind, keys, other_keys, system):
    mine = episodes.remember(keys, system, "Alice is allergic to peanuts", sender_id="u1").episode
    episodes.remember(other_keys, system, "Carol is allergic to peanuts too", sender_id="u1")
    theirs = episodes.remember(keys, system, "Dan is allergic to cats", sender_id="u2").episode

    assert PendingVector.objects.count() == 3
    assert mine.episode_id not in recalled(other_keys, "who is allergic to peanuts?")
    assert recalled(keys, "allergic", sender_id="u2") == [theirs.episode_id]
    speaker_first = retrieval.retrieve(keys, "who is allergic to peanuts?", speaker_id="u2")
    assert {c.hit.episode.episode_id for c in speaker_first.candidates if "speaker" in c.stages} == {theirs.episode_id}
    episodes.archive(keys, system, [mine.episode_id])
    assert mine.episode_id not in recalled(keys, "who is allergic to peanuts?")
    assert recalled(keys, "who is allergic to peanuts?", statuses=["archived"]) == [mine.episode_id]


def test_a_correction_right_after_the_original_supersedes_it(behind, keys, system):
    old = episodes.remember(keys, system, ABOVE[0], sender_id="alice").episode
    result = episodes.remember(keys, system, ABOVE[1], tags=["correction"], sender_id="alice")

    assert result.superseded == [old.episode_id]
    assert Episode.objects.get(pk=old.pk).status == "superseded"
    batch = remember_many(
        keys, system, [{"content": ABOVE[0], "sender_id": "bob"}, {"content": "Lunch is at noon", "sender_id": "bob"}]
    )
    fixed = remember_many(keys, system, [{"content": ABOVE[1], "sender_id": "bob", "tags": ["correction"]}])
    assert fixed.results[0].superseded == [batch.results[0].episode.episode_id]


# --- draining -----------------------------------------------------------------------------------


def test_the_worker_drains_in_batches_and_marks_episodes_current(behind, keys, other_keys, system):
    made = [episodes.remember(keys, system, f"fact number {i} about gardens").episode for i in range(5)]
    made.append(episodes.remember(other_keys, system, "a fact elsewhere").episode)
    gone = episodes.remember(keys, system, "soon deleted").episode
    episodes.delete(keys, system, [gone.episode_id])  # its pending vector goes with it
    archived = made[0]
    episodes.archive(keys, system, [archived.episode_id])

    call_command("jobs_worker", "--batch")

    assert PendingVector.objects.count() == 0
    assert all(Episode.objects.get(pk=e.pk).vector_current for e in made)
    assert {e.episode_id for e in made[:5]} == set(vectors.all_ids(keys.user_key))
    assert not in_index(keys, gone.episode_id)
    stored = vectors.get(keys.user_key, [archived.episode_id])[archived.episode_id]["metadata"]
    assert stored["status"] == "archived"  # the row as it is at drain time
    assert reindex(check_only=True).drift == 0


def test_the_thread_drains_on_its_own(settings, keys, system):
    settings.MEMCONSOLE_INDEXER = "thread"
    settings.MEMCONSOLE_INDEX_DELAY_MS = 0
    try:
        result = episodes.remember(keys, system, "The cat sleeps on the piano")
        wait_until(lambda: not PendingVector.objects.exists())
    finally:
        indexer.stop(flush=False)
    assert in_index(keys, result.episode.episode_id)
    assert Episode.objects.get(pk=result.episode.pk).vector_current


def test_a_vector_of_another_model_is_embedded_again_not_written(behind, keys, system):
    episode = episodes.remember(keys, system, "The library opens at nine").episode
    PendingVector.objects.update(model_id="some-older-model", vector=pending.to_bytes(np.ones(384, dtype=np.float32)))

    report = indexer.drain()

    assert (report.indexed, report.reembedded) == (1, 1)
    stored = vectors.get(keys.user_key, [episode.episode_id], include_embeddings=True)[episode.episode_id]
    expected = embeddings.embed(["The library opens at nine"])[0]
    assert float(np.dot(stored["embedding"], expected)) > 0.999
    assert Episode.objects.get(pk=episode.pk).vector_model == embeddings.current_model_id()


def test_a_repair_run_writes_the_backlog_first_and_a_check_does_not_call_it_drift(behind, keys, system):
    result = episodes.remember(keys, system, "The museum is closed on Mondays")

    checked = reindex(check_only=True)
    assert (checked.drift, checked.pending) == (0, 1) and checked.ok
    repaired = reindex(check_only=False)
    assert repaired.drained == 1 and in_index(keys, result.episode.episode_id)
    assert not PendingVector.objects.exists()


# --- the health check ---------------------------------------------------------------------------


def test_the_health_check_shows_the_backlog_and_warns_when_it_is_old(behind, keys, system):
    assert check_index_backlog().status == "OK"
    episodes.remember(keys, system, "first")
    episodes.remember(keys, system, "second")
    fresh = check_index_backlog()
    assert fresh.status == "OK" and "2 vectors waiting" in fresh.detail
    PendingVector.objects.update(created_at=timezone.now() - timedelta(hours=2))
    late = check_index_backlog()
    assert late.status == "WARN" and "2 vectors waiting" in late.detail and "jobs_worker" in late.fix
    ready = Client().get("/readyz").json()
    assert ready["index_backlog"]["pending"] == 2 and ready["index_backlog"]["oldest_seconds"] > 7000
    indexer.drain()
    assert "no vector is waiting" in check_index_backlog().detail
    assert "index_backlog" not in Client().get("/readyz").json()


def test_a_pending_vector_of_content_edited_since_is_never_written(behind, keys, system):
    episode = episodes.remember(keys, system, "The bakery sells rye bread").episode
    row = Episode.objects.get(pk=episode.pk)
    row.set_content("The bakery sells croissants")  # an edit whose own index write did not happen
    row.version += 1
    row.save(update_fields=["content_stored", "version"])

    assert indexer.drain().reembedded == 1
    stored = vectors.get(keys.user_key, [episode.episode_id], include_embeddings=True)[episode.episode_id]
    assert float(np.dot(stored["embedding"], embeddings.embed(["The bakery sells croissants"])[0])) > 0.999


def test_metrics_show_the_backlog(behind, keys, system):
    episodes.remember(keys, system, "a vector waiting")
    series = {metric.name: metric.samples[0].value for metric in JobCollector().collect() if metric.samples}
    assert series["memconsole_index_backlog"] == 1 and series["memconsole_index_backlog_oldest_seconds"] >= 0


def test_the_thread_rests_after_each_upsert_so_requests_never_wait_for_a_whole_drain(behind, keys, other_keys, system):
    """Embedded Chroma holds the GIL while it writes: the thread's drain hands each upsert's time
    to its pace, which rests three times as long before the next one (requests beside it wait at
    most one upsert); a stopped thread rests no more."""
    episodes.remember(keys, system, "The cat sleeps on the piano")
    episodes.remember(other_keys, system, "The dog sleeps under the table")
    paced: list[float] = []

    done = indexer.drain(pace=paced.append)

    assert done.indexed == 2
    assert len(paced) == 2 and all(seconds > 0 for seconds in paced)  # one upsert per space
    thread = indexer.Indexer(poll=60)
    thread.stopped.set()
    thread.rest(60)  # returns at once: a stopping process does not wait out a rest
