"""Sentence embeddings: all-MiniLM-L6-v2 through onnxruntime and `tokenizers` (384 dimensions).

Texts are batched with dynamic padding (each batch is padded to its longest member, texts sorted by
length first), mean-pooled over the attention mask and L2-normalised, so the vectors match
sentence-transformers' and chromadb's `ONNXMiniLM_L6_V2` (which pads every input to 256 tokens).

The model is loaded lazily from MEMCONSOLE_MODEL_DIR (`model.onnx` or `onnx/model.onnx`, and
`tokenizer.json`). Without a model, a deterministic lexical embedder keeps the product working;
its vectors are a different space, recorded as the model id "lexical-fallback-v1".
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

import numpy as np
import onnxruntime
from django.conf import settings
from tokenizers import Tokenizer

from . import metrics

log = logging.getLogger("memconsole.embeddings")

DIMENSIONS = 384
MAX_TOKENS = 256
BATCH_SIZE = 32
FALLBACK_ID = "lexical-fallback-v1"


class EmbeddingError(Exception):
    """The model folder exists but cannot be loaded."""


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
    def __init__(self, files: ModelFiles) -> None:
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
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.input_names = {node.name for node in self.session.get_inputs()}
        self.model_id = "minilm-" + file_sha256(files.onnx)[:16]
        self.is_fallback = False

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
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
            hidden = self.session.run(None, feed)[0]
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

    def embed(self, texts: list[str]) -> np.ndarray:
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
_embedder_dir: Path | None = None


def get_embedder() -> OnnxEmbedder | LexicalEmbedder:
    """The process-wide embedder for MEMCONSOLE_MODEL_DIR, built on first use."""
    global _embedder, _embedder_dir
    model_dir = Path(settings.MEMCONSOLE_MODEL_DIR)
    with _lock:
        if _embedder is None or _embedder_dir != model_dir:
            files = find_model_files(model_dir)
            if files is None:
                log.warning(
                    "No embedding model in %s (MEMCONSOLE_MODEL_DIR): using the lexical fallback, which "
                    "matches words, not meaning. Run `python manage.py fetch_model` or point "
                    "MEMCONSOLE_MODEL_DIR at an all-MiniLM-L6-v2 folder.",
                    model_dir,
                )
                _embedder = LexicalEmbedder()
            else:
                _embedder = OnnxEmbedder(files)
            _embedder_dir = model_dir
        return _embedder


def embed(texts: list[str]) -> np.ndarray:
    with metrics.embedding(len(texts)):
        return get_embedder().embed(texts)


def current_model_id() -> str:
    return get_embedder().model_id
