"""Embeddings: the real model matches chromadb's, batches pad dynamically, the fallback, model changes,
and semantic recall of a paraphrase."""

from __future__ import annotations

import hashlib
import logging

import numpy as np
import pytest
from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

from memconsole.lib import embeddings, vectors
from memconsole.memory import episodes, retrieval, sync
from memconsole.memory.models import AuditEntry, Episode
from tests.conftest import MODEL_DIR

TEXTS = [
    "hi",
    "I am planning a trip to Beijing next month",
    "我喜欢喝绿茶，尤其是龙井。",
    (
        "The quarterly report is due on Friday, and the finance team needs the revised numbers by Wednesday "
        "so that they can reconcile the accounts before the board meeting."
    ),
    # longer than the 256-token window: both sides truncate
    " ".join(f"word{n} about the weather and the trains" for n in range(80)),
]


@pytest.fixture(scope="module")
def chroma_ef(tmp_path_factory):
    """chromadb's own ONNXMiniLM_L6_V2, pointed at the same model files (never downloads)."""
    folder = tmp_path_factory.mktemp("chroma-onnx")
    (folder / ONNXMiniLM_L6_V2.EXTRACTED_FOLDER_NAME).symlink_to(MODEL_DIR, target_is_directory=True)
    ef = ONNXMiniLM_L6_V2(preferred_providers=["CPUExecutionProvider"])
    ef.DOWNLOAD_PATH = folder
    for name in (
        "config.json",
        "model.onnx",
        "special_tokens_map.json",
        "tokenizer_config.json",
        "tokenizer.json",
        "vocab.txt",
    ):
        assert (folder / "onnx" / name).exists(), name  # so chromadb finds every file and never downloads
    return ef


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_it_matches_chromadbs_minilm_on_the_same_model_files(chroma_ef):
    ours = embeddings.embed(TEXTS)
    theirs = np.asarray(chroma_ef(TEXTS), dtype=np.float32)
    assert ours.shape == theirs.shape == (len(TEXTS), 384)
    for text, mine, reference in zip(TEXTS, ours, theirs, strict=True):
        assert _cosine(mine, reference) > 1 - 1e-4, text[:30]
        assert np.abs(mine - reference).max() < 1e-3


def test_it_returns_unit_vectors_of_384_dimensions():
    out = embeddings.embed(TEXTS)
    assert out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert embeddings.embed([]).shape == (0, 384)


def test_it_gives_the_same_vector_alone_and_in_a_padded_batch():
    texts = TEXTS * 7  # 35 texts: two batches of mixed lengths, each padded to its longest
    batch = embeddings.embed(texts)
    alone = {text: embeddings.embed([text])[0] for text in TEXTS}
    for position, text in enumerate(texts):
        assert _cosine(alone[text], batch[position]) > 1 - 1e-5
        assert np.abs(alone[text] - batch[position]).max() < 1e-4


def test_it_names_the_model_by_its_files_sha256():
    embedder = embeddings.get_embedder()
    assert not embedder.is_fallback
    assert embeddings.current_model_id() == "minilm-" + embeddings.file_sha256(MODEL_DIR / "model.onnx")[:16]


def test_it_reports_a_model_folder_that_cannot_load(tmp_path, settings):
    (tmp_path / "model.onnx").write_bytes(b"not an onnx model")
    (tmp_path / "tokenizer.json").write_bytes((MODEL_DIR / "tokenizer.json").read_bytes())
    settings.MEMCONSOLE_MODEL_DIR = tmp_path
    with pytest.raises(embeddings.EmbeddingError, match=str(tmp_path)):
        embeddings.get_embedder()


# --- the lexical fallback ------------------------------------------------------------------------------


@pytest.fixture
def no_model(tmp_path, settings):
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "empty-model-dir"
    return settings.MEMCONSOLE_MODEL_DIR


def test_it_falls_back_to_the_lexical_embedder_with_a_warning(no_model, caplog):
    with caplog.at_level(logging.WARNING, logger="memconsole.embeddings"):
        embedder = embeddings.get_embedder()
    assert embedder.is_fallback and isinstance(embedder, embeddings.LexicalEmbedder)
    assert embeddings.current_model_id() == embeddings.FALLBACK_ID == "lexical-fallback-v1"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "memconsole.embeddings"]
    assert len(warnings) == 1
    assert "MEMCONSOLE_MODEL_DIR" in warnings[0].getMessage() and str(no_model) in warnings[0].getMessage()


def test_it_makes_deterministic_lexical_vectors(no_model):
    first = embeddings.embed(TEXTS)
    again = embeddings.LexicalEmbedder().embed(list(reversed(TEXTS)))[::-1]
    assert np.array_equal(first, again)
    assert first.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    # a fixed known value: the same in every process and on every machine (no salted hash())
    vector = embeddings.embed(["a trip to Beijing next month"])[0]
    assert hashlib.sha256(vector.tobytes()).hexdigest()[:16] == "486a9d7c15ebc726"
    assert np.array_equal(embeddings.embed(["hi"])[0], embeddings.embed(["HI"])[0])  # case-folded
    shared = embeddings.embed(["trip to Beijing", "a trip to Beijing next month", "dumplings for dinner"])
    assert shared[0] @ shared[1] > shared[0] @ shared[2]


@pytest.mark.django_db
def test_it_keeps_remember_and_recall_working_on_the_fallback(no_model, keys, system):
    made = episodes.remember(keys, system, "a trip to Beijing next month").episode
    episodes.remember(keys, system, "dumplings for dinner")
    assert made.vector_model == "lexical-fallback-v1"
    assert retrieval.recall(keys, "Beijing trip")[0].episode.episode_id == made.episode_id


# --- a model change: vector spaces never mix -------------------------------------------------------------


@pytest.mark.django_db
def test_it_never_mixes_vectors_of_two_models_and_keeps_recall_answering(keys, system, settings, tmp_path):
    made = episodes.remember(keys, system, "a trip to Beijing next month").episode
    real_model = embeddings.current_model_id()
    assert vectors.collection_model(keys.user_key) == real_model

    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "no-model"  # the model went away: the fallback takes over
    # A model switch (memory/reembed.py): recall keeps answering; the other model's collection is
    # never searched with this model's vectors.
    assert retrieval.recall(keys, "Beijing trip")[0].episode.episode_id == made.episode_id
    with pytest.raises(vectors.ModelMismatch, match="reindex"):
        vectors.query(keys.user_key, embeddings.current_model_id(), embeddings.embed(["x"])[0], 5)
    # a new episode is kept and indexed in its own model's staging copy, never in the other model's space
    later = episodes.remember(keys, system, "dumplings for dinner")
    assert later.indexed
    assert vectors.collection_model(keys.user_key) == real_model
    assert vectors.staging_model(keys.user_key) == "lexical-fallback-v1"

    # what `reindex` does for a model change: rebuild the scope's collection with the current model
    vectors.drop(keys.user_key)
    sync.index_episodes(list(Episode.objects.filter(user_key=keys.user_key)))
    assert vectors.collection_model(keys.user_key) == "lexical-fallback-v1"
    assert retrieval.recall(keys, "Beijing trip")[0].episode.episode_id == made.episode_id

    settings.MEMCONSOLE_MODEL_DIR = MODEL_DIR  # and back again: recall still answers (the lexical index)
    assert retrieval.recall(keys, "Beijing trip")[0].episode.episode_id == made.episode_id


# --- the real model finds meaning, not words ---------------------------------------------------------------


@pytest.mark.django_db
def test_it_finds_a_paraphrase_above_unrelated_episodes(keys, system):
    trip = episodes.remember(keys, system, "a trip to Beijing next month").episode
    for text in (
        "My favourite food is dumplings",
        "The team meeting moved to Thursday",
        "I need to renew my car insurance",
        "Our cat knocked over the plant again",
        "The printer on the second floor is out of toner",
    ):
        episodes.remember(keys, system, text)

    hits = retrieval.recall(keys, "travel plans", top_k=6)

    assert hits[0].episode.episode_id == trip.episode_id
    assert "travel" not in trip.content and "plan" not in trip.content  # no shared words
    assert hits[0].breakdown.exact == 1.0
    assert hits[0].breakdown.similarity > hits[1].breakdown.similarity + 0.1


@pytest.mark.django_db
def test_it_finds_a_chinese_paraphrase_above_unrelated_episodes(keys, system):
    trip = episodes.remember(keys, system, "下个月我要去北京旅行").episode
    for text in ("我喜欢喝绿茶", "明天下午开会", "我的猫很调皮", "我的汽车保险需要续保", "他每天早上跑步"):
        episodes.remember(keys, system, text)

    hits = retrieval.recall(keys, "去北京的计划", top_k=6)  # "plans to go to Beijing"

    assert hits[0].episode.episode_id == trip.episode_id
    assert hits[0].breakdown.exact == 1.0
    assert hits[0].breakdown.similarity > hits[1].breakdown.similarity + 0.05


@pytest.mark.django_db
def test_it_keeps_a_correction_when_the_index_cannot_check_what_it_supersedes(keys, system, settings, tmp_path):
    old = episodes.remember(keys, system, "Alice lives in Paris").episode
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "no-model"  # the index now refuses this model's searches
    result = episodes.remember(keys, system, "Alice lives in Berlin, not Paris", tags=["correction"])
    assert Episode.objects.filter(episode_id=result.episode.episode_id).exists()
    assert result.superseded == []  # (it is indexed: in its own model's staging copy, memory/reembed.py)
    assert Episode.objects.get(pk=old.pk).status == "active"
    entry = AuditEntry.objects.get(target_id=result.episode.episode_id)
    assert "reindex" in entry.payload["metadata"]["supersede_skipped"]
