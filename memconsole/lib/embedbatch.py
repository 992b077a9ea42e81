"""Concurrent embedding calls merged into one model call (a micro-batch across requests).

Embedding one short text costs nearly as much as embedding several together (the model call's
fixed cost dominates on a CPU), and each bot request embeds its own text. `Coalescer.embed` lets
the first caller run the model at once on whatever is queued (its own texts, and those of callers
that arrived while a model call was running), and hands the results out; the others wait for
theirs. A caller alone never waits for anyone (nothing is delayed to gather a batch). Calls are
merged only with calls for the same embedder and kind (query or passage prefix). An error of the
model call is raised in every caller whose texts were in it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

MAX_TEXTS = 256  # at most this many texts in one merged call


class Embedder(Protocol):
    def embed(self, texts: list[str], kind: Any = "passage") -> np.ndarray: ...


@dataclass(eq=False)
class _Call:
    embedder: Embedder
    texts: list[str]
    kind: str
    done: threading.Event = field(default_factory=threading.Event)
    lead: bool = False  # woken to run the next merged call, not with its result
    result: np.ndarray | None = None
    error: BaseException | None = None


class Coalescer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[_Call] = []
        self._running = False
        self.model_calls = 0  # merged calls made (what the tests and the metrics read)

    def embed(self, embedder: Embedder, texts: list[str], kind: str) -> np.ndarray:
        call = _Call(embedder, list(texts), kind)
        with self._lock:
            self._queue.append(call)
            leading = not self._running
            self._running = True
        while not leading:
            call.done.wait()
            if not call.lead:
                break
            call.done.clear()
            call.lead, leading = False, True
        if leading:
            self._run_next()
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    def _run_next(self) -> None:
        """Run one merged call (the oldest queued call and those like it), then pass the lead on."""
        with self._lock:
            first = self._queue[0]
            batch: list[_Call] = []
            size = 0
            for queued in self._queue:
                if queued.embedder is first.embedder and queued.kind == first.kind:
                    if batch and size + len(queued.texts) > MAX_TEXTS:
                        break
                    batch.append(queued)
                    size += len(queued.texts)
            self._queue = [queued for queued in self._queue if queued not in batch]
            self.model_calls += 1
        try:
            vectors = first.embedder.embed([text for queued in batch for text in queued.texts], kind=first.kind)
        except BaseException as exc:  # raised again in each caller whose texts it held
            for queued in batch:
                queued.error = exc
        else:
            start = 0
            for queued in batch:
                queued.result = vectors[start : start + len(queued.texts)]
                start += len(queued.texts)
        with self._lock:
            if self._queue:
                self._queue[0].lead = True
                self._queue[0].done.set()
            else:
                self._running = False
        for queued in batch:
            queued.done.set()
