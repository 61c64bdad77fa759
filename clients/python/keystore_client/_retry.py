"""How long to wait before trying a request again, and when to stop.

Bounded exponential backoff with full jitter: the n-th pause is uniform in
[0, min(max_delay, base_delay * 2**(n-1))], so a crowd of clients that failed together does not
come back together. A `Retry-After` from the service is a floor on the pause (the service knows
when the lease runs out or the limit resets). Two bounds stop the loop: `tries` in all, and a
total time `budget` that a pause may not overrun (the caller gets the error at once instead of
sleeping past its budget).

Which failures are retried at all is decided by the client, not here: where the request
provably was not applied (no connection), where the service said so (429, 503), and a lost
answer, since every call of docs/api.md is safe to repeat (a claim proposes its own lease
token, so its repeat resumes what the lost one acquired).
"""
from __future__ import annotations

import random as _random
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Callable, Optional


@dataclass(frozen=True)
class RetryPolicy:
    """Limits for retrying one call. `sleep`, `clock` and `random` are injectable for tests."""

    tries: int = 6  # the first try included
    base_delay: float = 0.25  # seconds: the ceiling of the first pause, doubled each time
    max_delay: float = 8.0  # seconds: the ceiling never grows past this
    budget: float = 30.0  # seconds from the first try: no pause may end later than this
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)
    random: Callable[[], float] = field(default=_random.random, compare=False, repr=False)

    @classmethod
    def never(cls) -> RetryPolicy:
        """One try, no retries."""
        return cls(tries=1)

    def start(self) -> Retrying:
        return Retrying(self)


class Retrying:
    """The state of one call's retries: how many tries so far and since when."""

    def __init__(self, policy: RetryPolicy):
        self.policy = policy
        self.started = policy.clock()
        self.tries = 1

    def elapsed(self) -> float:
        return self.policy.clock() - self.started

    def remaining(self) -> float:
        return max(0.0, self.policy.budget - self.elapsed())

    def next_delay(self, retry_after: Optional[float] = None) -> Optional[float]:
        """The pause before the next try, or None when the tries or the budget are used up."""
        p = self.policy
        if self.tries >= p.tries:
            return None
        ceiling = min(p.max_delay, p.base_delay * (2 ** (self.tries - 1)))
        delay = p.random() * ceiling
        if retry_after is not None:
            delay = max(delay, retry_after)
        if self.elapsed() + delay > p.budget:
            return None
        return delay

    def pause(self, retry_after: Optional[float] = None) -> bool:
        """Sleep before the next try and return True; False if no try is left."""
        delay = self.next_delay(retry_after)
        if delay is None:
            return False
        self.policy.sleep(delay)
        self.tries += 1
        return True


def parse_retry_after(value: Optional[str],
                      now: Callable[[], float] = time.time) -> Optional[float]:
    """`Retry-After` as seconds from now: delta-seconds or an HTTP date (RFC 9110 10.2.3).
    None when absent or unreadable (delta-seconds are ASCII digits only: `str.isdigit`
    alone takes "٣" or "³"); a date in the past is 0."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(min(int(value), 10 ** 9))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.fromtimestamp(now(), timezone.utc)).total_seconds())
