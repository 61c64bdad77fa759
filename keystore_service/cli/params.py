"""Numbers on the `keystore` command line: ASCII digits only, finite, in range.

click's IntRange and FloatRange convert with `int()` and `float()`, which read "٤٠٤"
(Arabic-Indic digits) as 404, and FloatRange lets "nan" through any bound (every comparison
with it is false). These refuse all of that as a usage error (exit 2)."""
from __future__ import annotations

import math
import re
from typing import Any, Optional

import click

_WHOLE = re.compile(r"[0-9]{1,12}", re.ASCII)
_DECIMAL = re.compile(r"[0-9]{1,12}(\.[0-9]{1,6})?", re.ASCII)


class Whole(click.ParamType):
    """A whole number from `low` (to `high`)."""

    name = "integer"

    def __init__(self, low: int, high: Optional[int] = None):
        self.low, self.high = low, high

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            n: Optional[int] = value  # a default
        else:
            n = int(value) if _WHOLE.fullmatch(str(value)) else None
        if n is None or n < self.low or (self.high is not None and n > self.high):
            shown = (f"from {self.low} to {self.high}" if self.high is not None
                     else f"of at least {self.low}")
            self.fail(f"{value!r} is not a whole number {shown}", param, ctx)
        return n


class Finite(click.ParamType):
    """A finite number from `low` to `high`, e.g. 2 or 0.5 (named so as not to shadow the
    standard library's `decimal.Decimal`)."""

    name = "number"

    def __init__(self, low: float, high: float):
        self.low, self.high = low, high

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        else:
            number = float(value) if _DECIMAL.fullmatch(str(value)) else math.nan
        if not self.low <= number <= self.high:  # false for nan too
            self.fail(f"{value!r} is not a number from {self.low:g} to {self.high:g}",
                      param, ctx)
        return number
