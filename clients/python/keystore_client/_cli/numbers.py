"""Numbers on the command line: ASCII digits only, finite, in range.

`int()` and `float()` read "٤٠٤" (Arabic-Indic digits) as 404, and `float()` takes "inf" and
"nan", which then compare false against any bound; these types refuse all of that with an
argparse error (exit 2) before anything is sent."""
from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import Optional

_WHOLE = re.compile(r"[0-9]{1,12}", re.ASCII)
_DECIMAL = re.compile(r"[0-9]{1,12}(\.[0-9]{1,6})?", re.ASCII)


def whole(low: int, high: Optional[int] = None) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` (to `high`), in ASCII digits."""
    shown = f"from {low} to {high}" if high is not None else f"of at least {low}"

    def parse(text: str) -> int:
        n = int(text) if _WHOLE.fullmatch(text) else None
        if n is None or n < low or (high is not None and n > high):
            raise argparse.ArgumentTypeError(f"a whole number {shown}")
        return n
    return parse


def seconds(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: seconds from `low` to `high`, e.g. 2 or 0.5, in ASCII digits."""
    def parse(text: str) -> float:
        value = float(text) if _DECIMAL.fullmatch(text) else math.nan
        if not low <= value <= high:  # false for nan too
            raise argparse.ArgumentTypeError(f"a number of seconds from {low:g} to {high:g}")
        return value
    return parse
