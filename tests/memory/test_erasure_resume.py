"""An erasure whose vector-index part did not finish is journaled, reported by the health check and
finished by running it again; nothing of the person stays in embedded Chroma's own files (its log,
its metadata tables, the unused capacity of a rebuilt collection's HNSW files). The kill -9 test is
tests/memory/test_erasure_crash.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from memconsole.lib import chromafiles, vectorpurge, vectors
from memconsole.memory import episodes, erasure, retrieval
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.erasure_index import RESUME_COMMAND
from memconsole.memory.erasure_journal import ErasureJournal
from memconsole.memory.health.erasures import check_unfinished_erasures
from memconsole.memory.models import AuditEntry, Episode
from memconsole.memory.reindex import reindex
from tests.chroma_server import server_mode

pytestmark = pytest.mark.django_db

SUBJECT = "subject-h1-4d2c"
embedded_only = pytest.mark.skipif(
    server_mode(), reason="reads embedded Chroma's own files, which a Chroma server keeps on its host"
)


@pytest.fixture
def people(keys, other_keys, system):
    """The subject in two bots' scopes, beside someone else whose memory must survive."""
    subject = {"sender_id": SUBJECT, "sender_name": "Erin"}
    made = [
        episodes.remember(keys, system, "Erin sails to Zanzibar in May", **subject),
        episodes.remember(keys, system, "Erin's ferry leaves at dawn", **subject),
        episodes.remember(other_keys, system, "Erin keeps bees in bot b", **subject),
        episodes.remember(keys, system, "My favourite food is dumplings", sender_id="u2", sender_name="Bob"),
    ]
    return [m.episode for m in made]


def _chroma_db(settings) -> Path:
    return Path(settings.CHROMA_PATH) / "chroma.sqlite3"


def _interrupted(user_key, batch=2000):
    raise vectors.VectorIndexError("killed while rebuilding")


def test_it_journals_an_unfinished_erasure_and_finishes_it_when_run_again(people, keys, system, monkeypatch):
    bob_ids = {people[3].episode_id}
    monkeypatch.setattr(vectorpurge, "rebuild_collection", _interrupted)

    first = erasure.erase_subject(SUBJECT, actor=system)

    assert first.vector_index["ok"] is False and first.receipt_audit_id
    assert not Episode.objects.filter(sender_id=SUBJECT).exists()  # the database part is committed
    journal = ErasureJournal.objects.get()
    assert journal.finished_at is None and len(journal.user_keys) == 2 and len(journal.vector_ids) == 3
    assert journal.receipt_audit_id == first.receipt_audit_id and "killed while rebuilding" in journal.last_error
    assert SUBJECT not in str(journal.describe()) and SUBJECT not in journal.last_error
    [shown] = erasure.unfinished()
    assert shown["collections_left"] == 2 and shown["bot_uuid"] == "*"
    check = check_unfinished_erasures()
    assert check.status == "ERROR" and RESUME_COMMAND in check.fix and journal.subject_digest[:12] in check.detail

    monkeypatch.undo()
    second = erasure.erase_subject(SUBJECT, actor=system)

    assert second.resumed and second.vector_index["ok"] is True, second.vector_index
    assert second.collections_rebuilt == 2
    assert second.receipt_audit_id == first.receipt_audit_id
    assert AuditEntry.objects.filter(operation="erase_subject").count() == 1  # no second receipt
    journal.refresh_from_db()
    assert journal.finished_at is not None and (journal.user_keys, journal.vector_ids, journal.marked) == ([], [], {})
    assert check_unfinished_erasures().status == "OK" and erasure.unfinished() == []
    assert set(vectors.all_ids(keys.user_key)) == bob_ids
    assert set(Episode.objects.values_list("vector_current", flat=True)) == {True}  # marked current again
    check = reindex(check_only=True)
    assert (check.not_current, check.missing, check.orphans) == (0, 0, 0)
    assert retrieval.recall(keys, "dumplings", top_k=1)[0].episode.sender_id == "u2"
    assert verify_audit_chain().ok


def test_it_finishes_every_unfinished_erasure_from_the_command_line(people, keys, system, monkeypatch, capsys):
    monkeypatch.setattr(vectorpurge, "rebuild_collection", _interrupted)
    with pytest.raises(CommandError, match="run the same erasure again"):
        call_command("erase_subject", "--sender-id", SUBJECT)
    monkeypatch.undo()
    capsys.readouterr()

    call_command("erase_subject", "--resume")

    out = capsys.readouterr()
    assert "resumed 1 unfinished erasures, 1 finished" in out.out
    assert "2 collections rebuilt, finished" in out.err and "rebuilding collection 1 of 2" in out.err
    assert not ErasureJournal.objects.filter(finished_at__isnull=True).exists()
    assert vectors.all_ids(keys.user_key) == [people[3].episode_id]
    with pytest.raises(CommandError, match="--resume takes no --sender-id"):
        call_command("erase_subject", "--resume", "--sender-id", SUBJECT)
    with pytest.raises(CommandError, match="give --sender-id"):
        call_command("erase_subject")


def test_it_resumes_from_the_first_collection_not_rebuilt(people, keys, other_keys, system, monkeypatch):
    real = vectorpurge.rebuild_collection
    rebuilt: list[str] = []

    def second_one_dies(user_key, batch=2000):
        if rebuilt:
            raise vectors.VectorIndexError("killed on the second collection")
        rebuilt.append(user_key)
        return real(user_key, batch)

    monkeypatch.setattr(vectorpurge, "rebuild_collection", second_one_dies)
    erasure.erase_subject(SUBJECT, actor=system)
    journal = ErasureJournal.objects.get()
    assert rebuilt == [keys.user_key] and journal.user_keys == [left := other_keys.user_key]
    assert Episode.objects.get(sender_id="u2").vector_current  # the rebuilt scope's rows are current again

    monkeypatch.undo()
    calls: list[str] = []
    monkeypatch.setattr(vectorpurge, "rebuild_collection", lambda uk, batch=2000: calls.append(uk) or real(uk, batch))
    report = erasure.erase_subject(SUBJECT, actor=system)

    assert calls == [left] and report.vector_index["ok"], report.vector_index
    assert not ErasureJournal.objects.filter(finished_at__isnull=True).exists()


@embedded_only
def test_it_purges_a_deleted_vector_that_chromas_log_still_holds(keys, system, settings):
    # A delete (here: an ordinary episode delete before the erasure) leaves the vector's add, with
    # its metadata and embedding, in Chroma's log for as long as the collection lives.
    kept = episodes.remember(keys, system, "My favourite food is dumplings", sender_id="u2").episode
    gone = episodes.remember(keys, system, "Erin's old note", sender_id=SUBJECT).episode
    episodes.delete(keys, system, [gone.episode_id])
    needle = chromafiles.metadata_needle("sender_id", SUBJECT).encode()
    assert not Episode.objects.filter(sender_id=SUBJECT).exists()
    assert needle in _chroma_db(settings).read_bytes()

    report = erasure.erase_subject(SUBJECT, actor=system)

    assert report.episodes == 0 and report.collections_rebuilt == 1 and report.vector_index["ok"], report.vector_index
    data = _chroma_db(settings).read_bytes()
    assert needle not in data and SUBJECT.encode() not in data and gone.episode_id.encode() not in data
    assert vectorpurge.collections_mentioning({"sender_id": SUBJECT}, [gone.episode_id]) == set()
    assert vectors.all_ids(keys.user_key) == [kept.episode_id]


@embedded_only
def test_it_leaves_nothing_in_a_rebuilt_collections_unused_hnsw_capacity(people, keys, system, settings):
    # chroma-core/hnswlib writes a new index's data_level0.bin and length.bin from uninitialised
    # memory: the bytes past the elements in use are whatever the process had freed before.
    erasure.erase_subject(SUBJECT, actor=system)

    for collection in vectors.get_client().list_collections():
        folder = chromafiles.vector_segment_folder(Path(settings.CHROMA_PATH), str(collection.id))
        if folder is None:
            continue
        _, _, _, count, per_element = chromafiles.HEADER.unpack_from((folder / "header.bin").read_bytes())
        assert not any((folder / "data_level0.bin").read_bytes()[count * per_element :]), folder
        assert not any((folder / "length.bin").read_bytes()[count * 4 :]), folder


@embedded_only
def test_it_scrubs_an_hnsw_folders_unused_capacity_and_the_index_still_answers(keys, system, settings):
    made = [episodes.remember(keys, system, f"note {n} about lunch", sender_id="u2").episode for n in range(5)]
    collection = vectors.get_client().get_collection(vectors.collection_name(keys.user_key))
    folder = chromafiles.vector_segment_folder(Path(settings.CHROMA_PATH), str(collection.id))
    _, _, _, count, per_element = chromafiles.HEADER.unpack_from((folder / "header.bin").read_bytes())
    marker = SUBJECT.encode()
    for name, at in (("data_level0.bin", count * per_element + 100), ("length.bin", count * 4 + 8)):
        with (folder / name).open("r+b") as handle:  # what stale process memory looks like there
            handle.seek(at)
            handle.write(marker)

    zeroed = chromafiles.scrub_unused_capacity(folder)

    assert zeroed > 0 and chromafiles.files_holding([folder], [marker]) == []
    vectors.reset_client()
    hits = retrieval.recall(keys, "note 3 about lunch", top_k=5)
    assert {h.episode.episode_id for h in hits} <= {e.episode_id for e in made} and hits


def test_it_finishes_a_rebuild_killed_between_dropping_the_collection_and_renaming_its_copy(keys, system):
    made = [episodes.remember(keys, system, f"note {n} about lunch", sender_id="u2").episode for n in range(3)]
    client = vectors.get_client()
    name = vectors.collection_name(keys.user_key)
    old = client.get_collection(name, embedding_function=None)
    page = old.get(include=["embeddings", "metadatas"])
    copy = client.create_collection(
        name[:40] + vectors.REBUILD_SUFFIX,
        embedding_function=None,
        configuration={"hnsw": {"space": vectors.SPACE}},
        metadata=dict(old.metadata or {}),
    )
    copy.upsert(ids=page["ids"], embeddings=np.asarray(page["embeddings"]), metadatas=page["metadatas"])
    client.delete_collection(name)  # the kill came here, before the rename
    vectors.reset_client()

    kept = vectorpurge.rebuild_collection(keys.user_key)

    assert kept == 3
    assert sorted(vectors.all_ids(keys.user_key)) == sorted(e.episode_id for e in made)
    assert not any(n.endswith(vectors.REBUILD_SUFFIX) for n in vectors.list_collections())
