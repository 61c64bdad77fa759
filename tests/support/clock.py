"""Time in tests: a fixed "now" and a clock the test moves by hand."""
from __future__ import annotations

T0 = 1_800_000_000_000_000  # 2027-01-15T08:00:00Z in microseconds: a fixed "now" for tests
SECOND = 1_000_000


class FakeClock:
    """A clock the test moves by hand: `now` is whatever the test says it is."""

    def __init__(self, now: int = T0):
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float = 0, micros: int = 0) -> int:
        self.now += int(seconds * SECOND) + micros
        return self.now
