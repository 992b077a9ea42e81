"""The embedding model registry: configuration, prefixes, pooling, the model id naming the model,
and `fetch_model --model NAME` with its sha256 pins.

The multilingual models' weights are not shipped: their loading, prefixes and pooling are exercised
end to end with registry entries pointed at the shipped all-MiniLM-L6-v2 folder, and their quality
test runs only where their weights are (MEMCONSOLE_TEST_MODELS_DIR/<name>, default ../shared/models/).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from memconsole.lib import embeddings
from memconsole.memory.management.commands import fetch_model
from tests.conftest import MODEL_DIR

MULTILINGUAL = ("paraphrase-multilingual-MiniLM-L12-v2", "multilingual-e5-small")
MODELS_DIR = Path(os.environ.get("MEMCONSOLE_TEST_MODELS_DIR") or MODEL_DIR.parent)
SHA256 = set("0123456789abcdef")


def minilm_files() -> embeddings.ModelFiles:
    files = embeddings.find_model_files(MODEL_DIR)
    assert files is not None
    return files


def test_it_lists_three_models_with_their_dimensions_pooling_and_prefixes():
    assert list(embeddings.REGISTRY) == ["all-MiniLM-L6-v2", *MULTILINGUAL]
    assert embeddings.DEFAULT_MODEL == "all-MiniLM-L6-v2"
    for spec in embeddings.REGISTRY.values():
        assert spec.dimensions == embeddings.DIMENSIONS == 384
        assert spec.pooling == "mean"
    e5 = embeddings.REGISTRY["multilingual-e5-small"]
    assert (e5.query_prefix, e5.passage_prefix) == ("query: ", "passage: ")
    assert e5.prefix("query") == "query: " and e5.prefix("passage") == "passage: "
    for name in ("all-MiniLM-L6-v2", "paraphrase-multilingual-MiniLM-L12-v2"):
        assert embeddings.REGISTRY[name].prefix("query") == embeddings.REGISTRY[name].prefix("passage") == ""


def test_it_pins_files_with_real_sha256_or_says_plainly_there_is_no_pin():
    for name in MULTILINGUAL:
        spec = embeddings.REGISTRY[name]
        assert {f.name for f in spec.files} == {"model.onnx", "tokenizer.json"}
        for item in spec.files:
            assert item.source
            if item.sha256 is None:
                assert "no published sha256" in item.source
            else:
                assert len(item.sha256) == 64 and set(item.sha256) <= SHA256
    e5 = {f.name: f for f in embeddings.REGISTRY["multilingual-e5-small"].files}
    assert e5["model.onnx"].sha256 and e5["tokenizer.json"].sha256


def test_it_selects_the_model_from_the_setting_and_refuses_an_unknown_one(settings):
    assert embeddings.model_spec().name == "all-MiniLM-L6-v2"
    settings.MEMCONSOLE_EMBEDDING_MODEL = "multilingual-e5-small"
    assert embeddings.model_spec().name == "multilingual-e5-small"
    settings.MEMCONSOLE_EMBEDDING_MODEL = "no-such-model"
    with pytest.raises(embeddings.EmbeddingError, match="multilingual-e5-small"):
        embeddings.get_embedder()


def test_it_names_the_model_in_its_id_so_a_switch_is_detected(settings):
    sha = embeddings.file_sha256(MODEL_DIR / "model.onnx")[:16]
    assert embeddings.current_model_id() == f"minilm-{sha}"  # the default keeps its ids: no reindex
    settings.MEMCONSOLE_EMBEDDING_MODEL = "multilingual-e5-small"  # same folder, another model: another id
    assert embeddings.current_model_id() == f"multilingual-e5-small-{sha}"
    settings.MEMCONSOLE_EMBEDDING_MODEL = "paraphrase-multilingual-MiniLM-L12-v2"
    assert embeddings.current_model_id() == f"paraphrase-multilingual-minilm-l12-v2-{sha}"


def test_it_embeds_queries_and_passages_alike_for_a_model_without_prefixes():
    texts = ["a trip to Beijing next month", "我喜欢吃火锅"]
    assert np.array_equal(embeddings.embed(texts), embeddings.embed(texts, kind="passage"))
    assert np.array_equal(embeddings.embed_query(texts), embeddings.embed(texts))


def test_it_applies_e5s_prefixes_and_mean_pooling_end_to_end():
    e5_on_minilm = embeddings.OnnxEmbedder(minilm_files(), embeddings.REGISTRY["multilingual-e5-small"])
    plain = embeddings.OnnxEmbedder(minilm_files())
    texts = ["where is my next business trip?", "我下周三要去成都出差", "¿Qué comida me gusta?"]

    query = e5_on_minilm.embed(texts, kind="query")
    passage = e5_on_minilm.embed(texts, kind="passage")

    assert np.allclose(query, plain.embed(["query: " + t for t in texts]), atol=1e-5)
    assert np.allclose(passage, plain.embed(["passage: " + t for t in texts]), atol=1e-5)
    assert not np.allclose(query, passage, atol=1e-3)
    assert np.allclose(np.linalg.norm(query, axis=1), 1.0, atol=1e-5)
    # mean pooling over the attention mask, then L2-normalised, computed by hand for one text
    encoding = plain.tokenizer.encode("query: " + texts[0])
    ids = np.array([encoding.ids], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    hidden = plain.session.run(None, feed)[0][0]
    mean = hidden.mean(axis=0)
    assert np.allclose(query[0], mean / np.linalg.norm(mean), atol=1e-5)


def test_it_routes_the_kind_through_the_process_embedder(settings):
    settings.MEMCONSOLE_EMBEDDING_MODEL = "multilingual-e5-small"  # pointed at the MiniLM folder
    plain = embeddings.OnnxEmbedder(minilm_files())
    assert np.allclose(embeddings.embed_query(["hi"]), plain.embed(["query: hi"]), atol=1e-5)
    assert np.allclose(embeddings.embed(["hi"]), plain.embed(["passage: hi"]), atol=1e-5)


def test_it_pools_on_the_first_token_for_a_cls_model():
    spec = dataclasses.replace(embeddings.REGISTRY["all-MiniLM-L6-v2"], name="cls-test", pooling="cls")
    cls = embeddings.OnnxEmbedder(minilm_files(), spec)
    mean = embeddings.OnnxEmbedder(minilm_files())
    out = cls.embed(["a trip to Beijing next month"])
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(out, mean.embed(["a trip to Beijing next month"]), atol=1e-3)


def test_it_truncates_at_the_models_token_window():
    spec = dataclasses.replace(embeddings.REGISTRY["all-MiniLM-L6-v2"], max_tokens=16)
    short = embeddings.OnnxEmbedder(minilm_files(), spec)
    assert len(short.tokenizer.encode(" ".join(["word"] * 100)).ids) == 16


def test_it_refuses_a_folder_whose_model_gives_another_dimension():
    spec = dataclasses.replace(embeddings.REGISTRY["all-MiniLM-L6-v2"], dimensions=768)
    with pytest.raises(embeddings.EmbeddingError, match="768"):
        embeddings.OnnxEmbedder(minilm_files(), spec).embed(["hi"])


# --- quality, where the weights are -----------------------------------------------------------------------


@pytest.mark.parametrize("name", MULTILINGUAL)
def test_it_matches_chinese_spanish_and_english_paraphrases_across_languages(name):
    folder = MODELS_DIR / name
    files = embeddings.find_model_files(folder)
    if files is None:
        pytest.skip(
            f"no {name} weights in {folder} (not shipped offline); `manage.py fetch_model --model {name}` "
            "installs them where a network is available, or set MEMCONSOLE_TEST_MODELS_DIR"
        )
    model = embeddings.OnnxEmbedder(files, embeddings.REGISTRY[name])
    passages = model.embed(["我下周三要去成都出差", "Mi comida favorita es la paella", "I work as a nurse"])
    queries = model.embed(["Where is my next business trip?", "我喜欢吃什么", "¿En qué trabajo?"], kind="query")
    assert list((queries @ passages.T).argmax(axis=1)) == [0, 1, 2]


# --- fetch_model --model ------------------------------------------------------------------------------


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A local "hub" (file:// URLs) serving a test registry entry: MiniLM's files under e5's name."""
    root = tmp_path / "hub"
    spec = embeddings.REGISTRY["multilingual-e5-small"]
    pinned = []
    for item, source in zip(spec.files, ("model.onnx", "tokenizer.json"), strict=True):
        path = root / item.url_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes((MODEL_DIR / source).read_bytes())
        pinned.append(dataclasses.replace(item, sha256=hashlib.sha256(path.read_bytes()).hexdigest()))
    test_spec = dataclasses.replace(spec, files=tuple(pinned))
    monkeypatch.setitem(embeddings.REGISTRY, spec.name, test_spec)
    monkeypatch.setitem(fetch_model.REGISTRY, spec.name, test_spec)
    return root, test_spec


def test_it_downloads_verifies_and_installs_a_registry_model(hub, settings, tmp_path, capsys):
    root, _ = hub
    settings.MEMCONSOLE_EMBEDDING_MODEL = "multilingual-e5-small"
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "models" / "multilingual-e5-small"

    call_command("fetch_model", "--model", "multilingual-e5-small", "--hub-url", root.as_uri())

    assert "Model installed" in capsys.readouterr().out
    assert (settings.MEMCONSOLE_MODEL_DIR / "model.onnx").read_bytes() == (MODEL_DIR / "model.onnx").read_bytes()
    assert embeddings.current_model_id().startswith("multilingual-e5-small-")


def test_it_installs_another_model_than_the_configured_one_beside_it(hub, settings, tmp_path, capsys):
    root, _ = hub
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "models" / "all-MiniLM-L6-v2"
    call_command("fetch_model", "--model", "multilingual-e5-small", "--hub-url", root.as_uri())
    assert embeddings.find_model_files(tmp_path / "models" / "multilingual-e5-small") is not None
    assert "MEMCONSOLE_EMBEDDING_MODEL=multilingual-e5-small" in capsys.readouterr().out
    assert not (tmp_path / "models" / "all-MiniLM-L6-v2").exists()


def test_it_refuses_a_file_whose_checksum_does_not_match_and_installs_nothing(hub, settings, tmp_path, monkeypatch):
    root, spec = hub
    wrong = (spec.files[0], dataclasses.replace(spec.files[1], sha256="0" * 64))
    monkeypatch.setitem(fetch_model.REGISTRY, spec.name, dataclasses.replace(spec, files=wrong))
    settings.MEMCONSOLE_EMBEDDING_MODEL = spec.name
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "model"
    with pytest.raises(CommandError, match=r"checksum mismatch for tokenizer\.json"):
        call_command("fetch_model", "--hub-url", root.as_uri())
    assert not (tmp_path / "model").exists()


def test_it_refuses_an_unpinned_file_unless_allowed(hub, settings, tmp_path, monkeypatch, capsys):
    root, spec = hub
    unpinned = (dataclasses.replace(spec.files[0], sha256=None, source="no published sha256 found"), spec.files[1])
    monkeypatch.setitem(fetch_model.REGISTRY, spec.name, dataclasses.replace(spec, files=unpinned))
    settings.MEMCONSOLE_EMBEDDING_MODEL = spec.name
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "model"
    with pytest.raises(CommandError, match="--allow-unpinned"):
        call_command("fetch_model", "--hub-url", root.as_uri())
    assert not (tmp_path / "model").exists()

    call_command("fetch_model", "--hub-url", root.as_uri(), "--allow-unpinned")
    assert embeddings.find_model_files(tmp_path / "model") is not None
    assert embeddings.file_sha256(MODEL_DIR / "model.onnx") in capsys.readouterr().err


def test_it_refuses_the_unpinned_multilingual_minilm_without_allow_unpinned(settings, tmp_path):
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "model"
    with pytest.raises(CommandError, match="no published sha256"):
        call_command("fetch_model", "--model", "paraphrase-multilingual-MiniLM-L12-v2")
    assert not (tmp_path / "paraphrase-multilingual-MiniLM-L12-v2").exists()
