"""The chart's geometry and the page's ways of writing times: pure functions."""
from __future__ import annotations

from keystore_service.web.ui import ui_chart, ui_text
from tests.support import SECOND, T0


def test_the_axis_top_is_a_round_number_at_or_above_the_peak():
    assert [ui_chart.nice_top(n) for n in (0, 1, 2, 3, 6, 11, 99, 101, 4000)] == \
        [1, 1, 2, 5, 10, 20, 100, 200, 5000]


def test_bar_heights_are_proportional_and_a_zero_day_has_none():
    days = [(f"2027-01-{d:02d}", v) for d, v in zip(range(1, 15), [0, 5, 10] + [1] * 11,
                                                     strict=True)]
    chart = ui_chart.bars(days)
    assert chart.top == 10 and chart.total == 26
    zero, five, ten = chart.bars[:3]
    assert zero.height == 0 and ten.height == 2 * five.height
    assert ten.y == chart.plot_top and ten.y + ten.height == chart.base
    assert [b.x for b in chart.bars] == sorted(b.x for b in chart.bars)
    assert chart.bars[-1].label == "01-14" and 5 <= sum(1 for b in chart.bars if b.label) <= 8


def test_an_empty_fortnight_draws_an_empty_chart():
    chart = ui_chart.bars([("2027-01-01", 0)] * 14)
    assert chart.top == 1 and all(b.height == 0 for b in chart.bars)


def test_times_and_ages_for_a_person():
    assert ui_text.when(T0) == "2027-01-15 08:00:00 UTC"
    assert ui_text.iso(T0) == "2027-01-15T08:00:00Z"
    assert ui_text.ago(T0 - 90 * SECOND, T0) == "1 min ago"
    assert ui_text.ago(T0 + 3 * 3600 * SECOND, T0) == "in 3 h"
    assert [ui_text.duration(s) for s in (5, 61, 3600 + 300, 86_400 * 2 + 3600 * 4)] == \
        ["5 s", "1 min", "1 h 5 min", "2 d 4 h"]


def test_fingerprints_are_shortened_only_for_display():
    fp = "sha256:" + "ab" * 32
    assert ui_text.short_fingerprint(fp) == "sha256:ababab…abab"
    assert ui_text.short_fingerprint("order-7") == "order-7"
    assert ui_text.short_fingerprint(None) == "none"
