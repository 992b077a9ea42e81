"""reindex: drift between the database and the vector index, found and repaired for real."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memconsole.lib import embeddings, vectors
from memconsole.memory import episodes, retrieval
from memconsole.memory import reindex as reindex_module
from memconsole.memory.models import STATUS_ARCHIVED, Episode
from memconsole.memory.reindex import reindex
from memconsole.memory.scopes import PROBE_USER_KEY_PREFIX
from tests.conftest import MODEL_DIR

pytestmark = pytest.mark.django_db


def orphan_vector(user_key: str, episode_id: str = "feedfeedfeed") -> None:
    vectors.upsert(
        user_key,
        embeddings.current_model_id(),
        [episode_id],
        embeddings.embed(["a vector without an episode"]),
        [{"user_key": user_key, "status": "active"}],
    )


def test_it_finds_no_drift_in_a_consistent_index(scope_with_episodes):
    report = reindex(check_only=True)

    assert report.drift == 0
    assert (report.scopes, report.episodes, report.vectors) == (1, 4, 4)
    assert report.ok and "no drift" in report.summary()


def test_it_repairs_a_deleted_vector(keys, scope_with_episodes):
    trip = scope_with_episodes[0]
    vectors.delete(keys.user_key, [trip.episode_id])
    # Hybrid recall (issue 16) may still find it through the lexical index, but with no vector.
    hits = [h for h in retrieval.recall(keys, "travel plans") if h.episode.episode_id == trip.episode_id]
    assert all(h.breakdown.similarity == 0 for h in hits)

    found = reindex(check_only=True)
    assert (found.missing, found.drift) == (1, 1)
    assert trip.episode_id not in vectors.get(keys.user_key, [trip.episode_id])  # --check changes nothing

    repaired = reindex(check_only=False)

    assert repaired.reembedded == 1 and repaired.ok
    assert retrieval.recall(keys, "travel plans", top_k=1)[0].episode.episode_id == trip.episode_id
    assert reindex(check_only=True).drift == 0


def test_it_repairs_stale_metadata(keys, scope_with_episodes):
    food = scope_with_episodes[1]
    # The index changed, the database did not (a database row changed by SQL is refused: test_tamper.py).
    vectors.update_metadata(keys.user_key, [food.episode_id], [{"status": STATUS_ARCHIVED.value}])

    found = reindex(check_only=True)
    assert found.stale == 1 and found.drift == 1

    repaired = reindex(check_only=False)

    assert repaired.metadata_fixed == 1
    assert vectors.get(keys.user_key, [food.episode_id])[food.episode_id]["metadata"]["status"] == "active"
    assert reindex(check_only=True).drift == 0


def test_it_removes_metadata_keys_the_row_no_longer_has(keys, scope_with_episodes):
    first = scope_with_episodes[0]
    meta = vectors.get(keys.user_key, [first.episode_id])[first.episode_id]["metadata"]
    vectors.update_metadata(keys.user_key, [first.episode_id], [{**meta, "planted": "x"}])

    assert reindex(check_only=True).stale == 1
    reindex(check_only=False)

    assert "planted" not in vectors.get(keys.user_key, [first.episode_id])[first.episode_id]["metadata"]
    assert reindex(check_only=True).drift == 0


def test_it_indexes_episodes_marked_not_current(keys, scope_with_episodes):
    Episode.objects.filter(user_key=keys.user_key).update(vector_current=False)
    vectors.drop(keys.user_key)  # as after a crash between the database commit and the index write

    found = reindex(check_only=True)
    assert found.not_current == 4

    repaired = reindex(check_only=False)

    assert repaired.reembedded == 4
    assert set(vectors.all_ids(keys.user_key)) == {e.episode_id for e in scope_with_episodes}
    assert not Episode.objects.filter(vector_current=False).exists()


def test_it_deletes_orphan_vectors_and_collections(keys, other_keys, scope_with_episodes):
    orphan_vector(keys.user_key)
    orphan_vector(other_keys.user_key)  # a collection for a scope without any episode

    found = reindex(check_only=True)
    assert (found.orphans, found.orphan_collections) == (1, 1)

    repaired = reindex(check_only=False)

    assert (repaired.orphans_deleted, repaired.collections_dropped) == (1, 1)
    assert "feedfeedfeed" not in vectors.all_ids(keys.user_key)
    assert other_keys.user_key not in vectors.list_collections().values()
    assert len(vectors.all_ids(keys.user_key)) == 4


def test_it_reembeds_a_collection_made_by_another_model(keys, system, settings, tmp_path):
    settings.MEMCONSOLE_MODEL_DIR = tmp_path  # no model: the lexical fallback writes these vectors
    episodes.remember(keys, system, "I am planning a trip to Beijing next month")
    episodes.remember(keys, system, "My favourite food is dumplings")
    settings.MEMCONSOLE_MODEL_DIR = MODEL_DIR
    # A model switch: recall keeps answering from the earlier index (memory/reembed.py); `reindex`
    # can still do the re-embedding in the foreground.
    assert retrieval.recall(keys, "travel plans") is not None

    found = reindex(check_only=True)
    assert (found.foreign_model_collections, found.not_current) == (1, 2)

    repaired = reindex(check_only=False)

    assert repaired.reembedded == 2 and repaired.ok
    assert vectors.collection_model(keys.user_key) == embeddings.current_model_id()
    assert "Beijing" in retrieval.recall(keys, "travel plans", top_k=1)[0].episode.content
    assert reindex(check_only=True).drift == 0


def test_it_repairs_in_batches(keys, system, monkeypatch):
    for i in range(7):
        episodes.remember(keys, system, f"note number {i}")
    Episode.objects.update(vector_current=False)
    monkeypatch.setattr(reindex_module, "EMBED_BATCH", 3)
    seen = []

    repaired = reindex(check_only=False, progress=lambda stage, done, total: seen.append((stage, done, total)))

    assert repaired.reembedded == 7
    assert [s for s in seen if s[0] == "repair"] == [("repair", 3, 7), ("repair", 6, 7), ("repair", 7, 7)]
    assert ("scan", 1, 1) in seen


def test_it_skips_the_health_probes_own_scopes(keys, scope_with_episodes):
    orphan_vector(PROBE_USER_KEY_PREFIX + "probe_x")

    assert reindex(check_only=True).drift == 0


def test_it_reports_and_repairs_from_the_command(keys, scope_with_episodes, capsys):
    vectors.delete(keys.user_key, [scope_with_episodes[0].episode_id])

    with pytest.raises(CommandError) as drift:
        call_command("reindex", "--check")
    assert drift.value.returncode == 1
    assert "1 episodes whose vector is missing" in str(drift.value)
    assert "scan: 1/1" in capsys.readouterr().err  # progress goes to stderr only

    call_command("reindex")
    out, err = capsys.readouterr()
    assert "repair: 1/1" in err and "1 re-embedded" in out and "repair: " not in out

    call_command("reindex", "--check")
    assert "no drift" in capsys.readouterr().out


def test_it_drops_the_leftover_of_an_interrupted_collection_rebuild(keys, scope_with_episodes):
    # What rebuild_collection leaves when it stops between copying and renaming: a temporary copy
    # carrying the scope's user_key (and, here, a vector the real collection no longer has).
    leftover = vectors.collection_name(keys.user_key)[:40] + vectors.REBUILD_SUFFIX
    copy = vectors.get_client().create_collection(
        leftover,
        embedding_function=None,
        configuration={"hnsw": {"space": "cosine"}},
        metadata={"user_key": keys.user_key, "model": embeddings.current_model_id()},
    )
    copy.upsert(
        ids=["feedfeedfeed"], embeddings=embeddings.embed(["stranded"]), metadatas=[{"user_key": keys.user_key}]
    )

    check = reindex(check_only=True)
    assert check.orphan_collections == 1 and check.drift == 1 and not check.ok

    report = reindex(check_only=False)

    assert report.collections_dropped == 1 and report.ok
    assert leftover not in vectors.list_collections()
    assert set(vectors.all_ids(keys.user_key)) == {e.episode_id for e in scope_with_episodes}
    assert reindex(check_only=True).drift == 0


def test_forgetting_a_spaces_last_episode_is_not_drift(keys, system):
    """A bot that forgets everything it stored in a chat leaves an empty collection: the health
    check must not call that drift (it said WARN, run reindex); a repair tidies it away."""
    episode = episodes.remember(keys, system, "a memory the user asks us to forget").episode
    assert episodes.delete(keys, system, [episode.episode_id]) == 1
    assert vectors.collection_model(keys.user_key) is not None  # the emptied collection is still there

    check = reindex(check_only=True)
    assert (check.drift, check.orphan_collections, check.ok) == (0, 0, True), check.summary()

    reindex(check_only=False)
    assert vectors.collection_model(keys.user_key) is None
    assert reindex(check_only=True).ok


@pytest.mark.parametrize("replaced", [True, False], ids=["rebuilt elsewhere", "dropped elsewhere"])
def test_recall_follows_a_collection_replaced_or_dropped_by_another_process(keys, scope_with_episodes, replaced):
    """recall keeps its collection handle between calls; when another process (reindex, erasure)
    replaced or dropped the collection meanwhile, the next recall looks it up again."""
    trip = scope_with_episodes[0]
    assert retrieval.recall(keys, "travel plans")[0].episode.episode_id == trip.episode_id  # handle kept
    client, name = vectors.get_client(), vectors.collection_name(keys.user_key)
    old = client.get_collection(name)
    stored = old.get(include=["embeddings", "metadatas"])
    client.delete_collection(name)  # behind this process's back, as another process would
    if replaced:
        fresh = client.create_collection(name, configuration={"hnsw": {"space": "cosine"}}, metadata=old.metadata)
        fresh.upsert(ids=stored["ids"], embeddings=stored["embeddings"], metadatas=stored["metadatas"])

    hits = retrieval.recall(keys, "travel plans")

    if replaced:
        assert [h.episode.episode_id for h in hits][:1] == [trip.episode_id]
    else:  # no vector left: only the lexical index can find anything (issue 16), with no similarity
        assert all(h.breakdown.similarity == 0 for h in hits)
