"""Server-rendered SVG charts (no JavaScript): the geometry of a bar chart, drawn by
templates/console/_bar_chart.html. Each bar carries its own label and value as a <title>."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH, HEIGHT, TOP_GAP = 600, 140, 8


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    value: str


@dataclass(frozen=True)
class BarChart:
    title: str
    bars: list[Bar]
    peak: str  # the largest value, printed beside the axis
    first: str
    last: str
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def empty(self) -> bool:
        return not any(bar.height for bar in self.bars)


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float], *, percent: bool = False) -> BarChart:
    """One bar per value, scaled to the largest; `percent` shows values (0..1) as percentages."""
    peak = max(values, default=0) or 0
    step = WIDTH / max(len(values), 1)
    gap = min(2.0, step / 4)

    def shown(value: float) -> str:
        return f"{value:.0%}" if percent else f"{value:,.0f}"

    bars = []
    for n, (label, value) in enumerate(zip(labels, values, strict=True)):
        height = (HEIGHT - TOP_GAP) * value / peak if peak else 0
        bars.append(Bar(n * step + gap / 2, HEIGHT - height, step - gap, height, label, shown(value)))
    return BarChart(title, bars, shown(peak), labels[0] if labels else "", labels[-1] if labels else "")
