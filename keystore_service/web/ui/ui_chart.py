"""The geometry of the page's bar chart (duplicates suppressed per day), computed here and
drawn as inline SVG by the template: no script, no external asset, readable without CSS.
"""
from __future__ import annotations

from dataclasses import dataclass

WIDTH, HEIGHT = 640, 200  # the SVG's own units; the page scales it to the column width
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 12, 28  # room for the axis labels


@dataclass(frozen=True, slots=True)
class Bar:
    day: str  # YYYY-MM-DD
    value: int
    x: float
    y: float
    width: float
    height: float
    label: str  # the day's x-axis label ("" for days left unlabelled)


@dataclass(frozen=True, slots=True)
class Chart:
    bars: list[Bar]
    top: int  # the value at the top of the axis
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    base: int = HEIGHT - BOTTOM  # y of the axis line
    plot_top: int = TOP

    @property
    def total(self) -> int:
        return sum(b.value for b in self.bars)


def nice_top(peak: int) -> int:
    """The axis maximum: the peak rounded up to 1, 2 or 5 times a power of ten (at least 1)."""
    if peak <= 1:
        return 1
    step = 1
    while True:
        for m in (1, 2, 5):
            if m * step >= peak:
                return m * step
        step *= 10


def bars(days: list[tuple[str, int]]) -> Chart:
    """Bars for (day, value) pairs, oldest first. Every bar's height is proportional to its
    value; a zero day has no bar; about seven days are labelled, always the last."""
    top = nice_top(max((v for _, v in days), default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(len(days), 1)
    every = max(1, round(len(days) / 7))
    out = []
    for i, (day, value) in enumerate(days):
        h = plot_h * value / top
        labelled = (len(days) - 1 - i) % every == 0
        out.append(Bar(day, value, round(LEFT + i * slot + slot * 0.15, 2),
                       round(HEIGHT - BOTTOM - h, 2), round(slot * 0.7, 2), round(h, 2),
                       day[5:] if labelled else ""))
    return Chart(out, top)
