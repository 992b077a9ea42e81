"""Sentence embeddings through onnxruntime and `tokenizers`, from a small registry of models.

MEMCONSOLE_EMBEDDING_MODEL names the model (`REGISTRY`: all-MiniLM-L6-v2, the default, English;
paraphrase-multilingual-MiniLM-L12-v2; multilingual-e5-small), each with its dimension, pooling,
token window, query/passage prefixes and the files `fetch_model` downloads with their sha256 pins.

Texts are batched with dynamic padding (each batch is padded to its longest member, texts sorted by
length first), pooled over the attention mask and L2-normalised; for all-MiniLM-L6-v2 the vectors
match sentence-transformers' and chromadb's `ONNXMiniLM_L6_V2` (which pads every input to 256 tokens).
`embed(texts, kind="query")` (or `embed_query`) marks search queries, for models such as e5 that
embed queries and passages with different prefixes; stored episodes are passages (the default).

The model is loaded lazily from MEMCONSOLE_MODEL_DIR (`model.onnx` or `onnx/model.onnx`, and
`tokenizer.json`). Its id, recorded on collections and rows, names the model and its file's sha256,
so a switch of model is detected. Without a model, a deterministic lexical embedder keeps the
product working; its vectors are a different space, recorded as the model id "lexical-fallback-v1".
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import onnxruntime
from django.conf import settings
from tokenizers import Tokenizer

from . import embedbatch, metrics

log = logging.getLogger("memconsole.embeddings")

DIMENSIONS = 384  # every model of the registry, and the lexical fallback
BATCH_SIZE = 32
FALLBACK_ID = "lexical-fallback-v1"
DEFAULT_MODEL = "all-MiniLM-L6-v2"

Kind = Literal["query", "passage"]
Pooling = Literal["mean", "cls"]


class EmbeddingError(Exception):
    """The model folder exists but cannot be loaded, or the configured model is unknown."""


@dataclass(frozen=True)
class ModelFile:
    """One file `fetch_model` downloads: `path` in the Hugging Face repository `repo` at `revision`,
    installed as `name`. `sha256` None means no published pin was found: not installed without
    `fetch_model --allow-unpinned`."""

    name: str
    repo: str
    revision: str
    path: str
    sha256: str | None
    source: str  # where the pin comes from, or why there is none

    @property
    def url_path(self) -> str:
        return f"{self.repo}/resolve/{self.revision}/{self.path}"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    id_prefix: str  # the model id is f"{id_prefix}-{sha256(model.onnx)[:16]}"
    dimensions: int
    pooling: Pooling
    max_tokens: int
    query_prefix: str = ""
    passage_prefix: str = ""
    languages: str = ""
    english_only: bool = False  # its similarities between Chinese or Japanese texts mean little (retrieval)
    files: tuple[ModelFile, ...] = ()
    notes: str = ""

    def prefix(self, kind: Kind) -> str:
        return self.query_prefix if kind == "query" else self.passage_prefix


_E5_REVISION = "761b726dd34fb83930e26aab4e9ac3899aa1fa78"
REGISTRY: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name=DEFAULT_MODEL,
            # "minilm-" keeps the ids of every index built before the registry: no reindex on upgrade.
            id_prefix="minilm",
            dimensions=384,
            pooling="mean",
            max_tokens=256,
            languages="English",
            english_only=True,
            notes="Installed by `fetch_model` from chromadb's pinned onnx.tar.gz archive (fetch_model.MODEL_SHA256).",
        ),
        ModelSpec(
            name="paraphrase-multilingual-MiniLM-L12-v2",
            id_prefix="paraphrase-multilingual-minilm-l12-v2",
            dimensions=384,
            pooling="mean",
            max_tokens=128,  # the model's max_seq_length
            languages="50+ languages, among them Chinese and Spanish",
            files=(
                ModelFile(
                    name="model.onnx",
                    repo="Xenova/paraphrase-multilingual-MiniLM-L12-v2",
                    revision="main",
                    path="onnx/model_quantized.onnx",
                    sha256=None,
                    source="no published sha256 of this ONNX file (nor a commit to pin) was found; "
                    "`fetch_model --allow-unpinned` installs it and prints the sha256 it got",
                ),
                ModelFile(
                    name="tokenizer.json",
                    repo="sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
                    revision="main",
                    path="tokenizer.json",
                    sha256="2c3387be76557bd40970cec13153b3bbf80407865484b209e655e5e4729076b8",
                    source="Git LFS sha256 of the repository's tokenizer.json, as shown by Hugging Face for "
                    "duplicates of sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
                ),
            ),
            notes="Mean pooling; sentence-transformers does not normalise it, memconsole does (cosine is unchanged).",
        ),
        ModelSpec(
            name="multilingual-e5-small",
            id_prefix="multilingual-e5-small",
            dimensions=384,
            pooling="mean",
            max_tokens=512,
            query_prefix="query: ",
            passage_prefix="passage: ",
            languages="about 100 languages, among them Chinese and Spanish",
            files=(
                ModelFile(
                    name="model.onnx",
                    repo="Xenova/multilingual-e5-small",
                    revision=_E5_REVISION,
                    path="onnx/model_quantized.onnx",
                    sha256="f80102d3f2a1229f387d3c81909990d8945513e347b0eab049f7de3c6f98c193",
                    source="Git LFS sha256 shown by Hugging Face for Xenova/multilingual-e5-small onnx/model_quantized.onnx",
                ),
                ModelFile(
                    name="tokenizer.json",
                    repo="Xenova/multilingual-e5-small",
                    revision=_E5_REVISION,
                    path="tokenizer.json",
                    sha256="0b44a9d7b51c3c62626640cda0e2c2f70fdacdc25bbbd68038369d14ebdf4c39",
                    source="Git LFS sha256 shown by Hugging Face for this tokenizer.json (the same file as "
                    "intfloat/multilingual-e5-small onnx/tokenizer.json)",
                ),
            ),
            notes="Queries are embedded as 'query: ...' and episodes as 'passage: ...'; mean pooling, normalised.",
        ),
    )
}


def model_spec(name: str | None = None) -> ModelSpec:
    """The registry entry for `name` (default: MEMCONSOLE_EMBEDDING_MODEL)."""
    name = name or settings.MEMCONSOLE_EMBEDDING_MODEL
    try:
        return REGISTRY[name]
    except KeyError:
        raise EmbeddingError(
            f"unknown embedding model {name!r} (MEMCONSOLE_EMBEDDING_MODEL); choose one of {', '.join(REGISTRY)}"
        ) from None


@dataclass(frozen=True)
class ModelFiles:
    onnx: Path
    tokenizer: Path


def find_model_files(model_dir: Path) -> ModelFiles | None:
    for onnx in (model_dir / "model.onnx", model_dir / "onnx" / "model.onnx"):
        tokenizer = onnx.parent / "tokenizer.json"
        if onnx.is_file() and tokenizer.is_file():
            return ModelFiles(onnx, tokenizer)
    return None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class OnnxEmbedder:
    def __init__(self, files: ModelFiles, spec: ModelSpec | None = None) -> None:
        self.spec = spec or REGISTRY[DEFAULT_MODEL]
        try:
            self.tokenizer = Tokenizer.from_file(str(files.tokenizer))
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3
            self.session = onnxruntime.InferenceSession(
                str(files.onnx), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime and tokenizers raise their own untyped errors
            raise EmbeddingError(f"cannot load the embedding model from {files.onnx.parent}: {exc}") from exc
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.spec.max_tokens)
        self.input_names = {node.name for node in self.session.get_inputs()}
        outputs = [node.name for node in self.session.get_outputs()]
        self.output_index = outputs.index("last_hidden_state") if "last_hidden_state" in outputs else 0
        self.model_id = f"{self.spec.id_prefix}-{file_sha256(files.onnx)[:16]}"
        self.is_fallback = False

    def embed(self, texts: list[str], kind: Kind = "passage") -> np.ndarray:
        dimensions = self.spec.dimensions
        if not texts:
            return np.zeros((0, dimensions), dtype=np.float32)
        prefix = self.spec.prefix(kind)
        encodings = self.tokenizer.encode_batch([prefix + text for text in texts] if prefix else texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(texts), dimensions), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            width = max(len(encodings[i].ids) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.input_names:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feed)[self.output_index]
            if hidden.ndim != 3 or hidden.shape[-1] != dimensions:
                raise EmbeddingError(
                    f"the model {self.spec.name} gave vectors of shape {hidden.shape}, not (batch, tokens, "
                    f"{dimensions}): is MEMCONSOLE_MODEL_DIR the folder of this model?"
                )
            if self.spec.pooling == "cls":
                pooled = hidden[:, 0, :]
            else:
                weights = mask[:, :, None].astype(np.float32)
                pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[batch] = pooled / np.clip(norms, 1e-12, None)
        return out


_WORD = re.compile(r"\w+", re.UNICODE)


class LexicalEmbedder:
    """Deterministic hashed bag of words and character trigrams. Finds shared words, not meaning."""

    model_id = FALLBACK_ID
    is_fallback = True

    def _features(self, text: str) -> list[str]:
        normalised = unicodedata.normalize("NFKC", text).lower()
        features = []
        for word in _WORD.findall(normalised):
            features.append("w:" + word)
            padded = f"#{word}#"
            features.extend("c:" + padded[i : i + 3] for i in range(max(1, len(padded) - 2)))
        return features

    def embed(self, texts: list[str], kind: Kind = "passage") -> np.ndarray:
        """`kind` makes no difference here: words are matched alike in queries and passages."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                index = int.from_bytes(digest[:4], "little") % DIMENSIONS
                sign = 1.0 if digest[4] & 1 else -1.0
                out[row, index] += sign * (2.0 if feature.startswith("w:") else 1.0)
            norm = math.sqrt(float(out[row] @ out[row]))
            if norm > 0:
                out[row] /= norm
        return out


_lock = threading.Lock()
_embedder: OnnxEmbedder | LexicalEmbedder | None = None
_embedder_key: tuple[Path, str] | None = None


def get_embedder() -> OnnxEmbedder | LexicalEmbedder:
    """The process-wide embedder for MEMCONSOLE_EMBEDDING_MODEL in MEMCONSOLE_MODEL_DIR, built on first use."""
    global _embedder, _embedder_key
    model_dir = Path(settings.MEMCONSOLE_MODEL_DIR)
    key = (model_dir, settings.MEMCONSOLE_EMBEDDING_MODEL)
    with _lock:
        if _embedder is None or _embedder_key != key:
            spec = model_spec(key[1])
            files = find_model_files(model_dir)
            if files is None:
                log.warning(
                    "No embedding model in %s (MEMCONSOLE_MODEL_DIR): using the lexical fallback, which "
                    "matches words, not meaning. Run `python manage.py fetch_model --model %s` or point "
                    "MEMCONSOLE_MODEL_DIR at a %s folder.",
                    model_dir,
                    spec.name,
                    spec.name,
                )
                _embedder = LexicalEmbedder()
            else:
                _embedder = OnnxEmbedder(files, spec)
            _embedder_key = key
        return _embedder


_coalescer = embedbatch.Coalescer()  # concurrent calls share one model call


def embed(texts: list[str], kind: Kind = "passage") -> np.ndarray:
    """Unit vectors for `texts`; `kind="query"` for a search query, "passage" for what is stored.
    Calls made at the same time by other threads are embedded in the same model call (embedbatch)."""
    with metrics.embedding(len(texts)):
        return _coalescer.embed(get_embedder(), texts, kind)


def embed_query(texts: list[str]) -> np.ndarray:
    """Vectors for search queries (the model's query prefix, if it has one)."""
    return embed(texts, kind="query")


def current_model_id() -> str:
    return get_embedder().model_id


# --- the model an index was built with (a safe model switch, memconsole/memory/reembed.py) -------------

_previous: dict[str, OnnxEmbedder | LexicalEmbedder | None] = {}


def spec_for_model_id(model_id: str) -> ModelSpec | None:
    """The registry entry whose id prefix `model_id` carries (`f"{id_prefix}-{sha16}"`), or None."""
    for spec in REGISTRY.values():
        rest = model_id.removeprefix(spec.id_prefix + "-")
        if rest != model_id and len(rest) == 16 and all(c in "0123456789abcdef" for c in rest):
            return spec
    return None


def embedder_for(model_id: str, folders: list[Path]) -> OnnxEmbedder | LexicalEmbedder | None:
    """An embedder that makes exactly the vectors of `model_id`, or None when its files are nowhere.

    The lexical fallback is always available; a model is looked for in `folders` (first the one it
    was recorded in, then its default folder) and its file's sha256 must match the id. Kept per
    process, so that each model file is hashed and loaded once.
    """
    if model_id == FALLBACK_ID:
        return LexicalEmbedder()
    current = get_embedder()
    if current.model_id == model_id:
        return current
    with _lock:
        if model_id in _previous:
            return _previous[model_id]
    spec = spec_for_model_id(model_id)
    found: OnnxEmbedder | LexicalEmbedder | None = None
    if spec is not None:
        for folder in folders:
            files = find_model_files(folder)
            if files is None or f"{spec.id_prefix}-{file_sha256(files.onnx)[:16]}" != model_id:
                continue
            try:
                found = OnnxEmbedder(files, spec)
            except EmbeddingError:
                log.warning("cannot load the earlier embedding model %s from %s", model_id, folder, exc_info=True)
                continue
            break
    with _lock:
        _previous[model_id] = found
    return found


def forget_previous() -> None:
    """Unload the earlier models (a switch is complete, or the settings changed)."""
    with _lock:
        _previous.clear()
