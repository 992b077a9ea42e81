"""Concurrent embedding calls share one model call (lib/embedbatch.py; issue 22: fast writes under
load): each caller still gets exactly the vectors of its own texts, and an error reaches every
caller whose texts were in the failed call."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memconsole.lib import embedbatch, embeddings

CALLERS = 8


class HeldModel:
    """The real model, whose first call waits until every other caller is queued (so that the test
    does not depend on thread timing); counts the texts of each model call."""

    def __init__(self, coalescer: embedbatch.Coalescer, fail: bool = False) -> None:
        self.real = embeddings.get_embedder()
        self.coalescer = coalescer
        self.fail = fail
        self.calls: list[int] = []
        self.release = threading.Event()

    def embed(self, texts: list[str], kind: embeddings.Kind = "passage") -> np.ndarray:
        if not self.calls:
            self.release.wait(30)
        self.calls.append(len(texts))
        if self.fail:
            raise embeddings.EmbeddingError("the model failed")
        return self.real.embed(texts, kind=kind)


def _run_concurrently(coalescer, model, texts):
    results: dict[int, object] = {}

    def call(n: int) -> None:
        try:
            results[n] = coalescer.embed(model, [texts[n]], "passage")
        except Exception as exc:
            results[n] = exc

    threads = [threading.Thread(target=call, args=(n,)) for n in range(CALLERS)]
    threads[0].start()
    while not coalescer._running:  # noqa: SLF001  the first caller holds the model
        pass
    for thread in threads[1:]:
        thread.start()
    while len(coalescer._queue) < CALLERS - 1:  # noqa: SLF001  everyone else waits in the queue
        threading.Event().wait(0.001)
    model.release.set()
    for thread in threads:
        thread.join(30)
    return results


def test_callers_arriving_together_share_one_model_call_and_get_their_own_vectors():
    coalescer = embedbatch.Coalescer()
    model = HeldModel(coalescer)
    texts = [
        f"memory number {n}: I like {word}"
        for n, word in enumerate(["tea", "coffee", "rice", "tofu", "jazz", "chess", "golf", "oat"])
    ]
    results = _run_concurrently(coalescer, model, texts)
    assert model.calls == [1, CALLERS - 1]  # the first alone, then everyone who queued meanwhile, at once
    solo = model.real.embed(texts)
    for n in range(CALLERS):
        assert results[n].shape == (1, 384)
        np.testing.assert_allclose(results[n][0], solo[n], atol=1e-5)


def test_a_failed_model_call_is_raised_in_every_caller_it_held():
    coalescer = embedbatch.Coalescer()
    model = HeldModel(coalescer, fail=True)
    results = _run_concurrently(coalescer, model, [f"text {n}" for n in range(CALLERS)])
    assert all(isinstance(results[n], embeddings.EmbeddingError) for n in range(CALLERS))
    assert not coalescer._running and not coalescer._queue  # noqa: SLF001  ready for the next call


def test_a_caller_alone_is_embedded_at_once_and_queries_keep_their_prefix():
    coalescer = embedbatch.Coalescer()
    model = embeddings.get_embedder()
    got = coalescer.embed(model, ["where do I work?"], "query")
    np.testing.assert_allclose(got, model.embed(["where do I work?"], kind="query"), atol=1e-6)
    assert coalescer.model_calls == 1 and coalescer.embed(model, [], "passage").shape == (0, 384)


@pytest.mark.django_db
def test_embed_goes_through_the_coalescer():
    before = embeddings._coalescer.model_calls  # noqa: SLF001
    embeddings.embed(["one text"])
    assert embeddings._coalescer.model_calls == before + 1  # noqa: SLF001
