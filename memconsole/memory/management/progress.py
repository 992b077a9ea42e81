"""Progress of a long management command, on stderr only (stdout keeps the command's result):
a tqdm bar per stage when stderr is a terminal, otherwise a plain line `stage: done/total` (at
most one every `every` seconds, besides the first and last of each stage; 0 = every call). Called
as the domain's `progress(stage, done, total)`."""

from __future__ import annotations

import time
from typing import Any, TextIO

from tqdm import tqdm  # type: ignore[import-untyped]  # no stubs in the test requirements


class StderrProgress:
    def __init__(self, stream: TextIO, *, every: float = 0.0, enabled: bool = True) -> None:
        self.stream = stream
        self.every = every
        self.enabled = enabled
        self.terminal = bool(getattr(stream, "isatty", lambda: False)())
        self._bar: Any = None
        self._stage = ""
        self._line_at = 0.0

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        if self.terminal:
            self._draw(stage, done, total)
            return
        now = time.monotonic()
        if stage != self._stage or done == total or now - self._line_at >= self.every:
            self._stage, self._line_at = stage, now
            self.stream.write(f"{stage}: {done}/{total if total is not None else '?'}\n")
            self.stream.flush()

    def _draw(self, stage: str, done: int, total: int | None) -> None:
        if stage != self._stage or self._bar is None:
            self.close()
            self._stage = stage
            self._bar = tqdm(total=total, desc=stage, file=self.stream, unit="", dynamic_ncols=True, leave=True)
        if total is not None and self._bar.total != total:
            self._bar.total = total
        self._bar.n = done
        self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> StderrProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stderr_of(command: Any) -> TextIO:
    """The real stream under a command's OutputWrapper (for isatty and tqdm)."""
    stream: TextIO = getattr(command.stderr, "_out", command.stderr)
    return stream
