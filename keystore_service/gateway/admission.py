"""Which deliveries to a source's ingest URL the gateway takes in, by rate, per source and per
process (issue 25, item 5): the source's rate is spent only by deliveries whose signature
checked out; a missing or wrong signature draws on a separate, smaller budget of its own,
so junk posted to an ingest URL never makes a correctly signed delivery answer 429.

    signed delivery, source's rate left        taken in
    signed delivery, source's rate spent       429 rate_limited + Retry-After
    bad signature, bad-signature budget left   401 invalid_signature (the caller raises it)
    bad signature, that budget spent           429 rate_limited + Retry-After

Both are token buckets of this process, as the source rate always was
(KEYSTORE_HOOK_RATE_LIMIT_PER_SECOND): counting junk in the database, so that a budget held
across processes, would make every junk request a write.
"""
from __future__ import annotations

import threading
import time
from typing import Optional

from keystore_service import errors


class RateBuckets:
    """Per-key token buckets of this process: `rate` takes a second, bursts of a second's
    worth. take() is None when one may pass, else the seconds to wait."""

    MAX_KEYS = 100_000  # sources seen by one process; past it the buckets start full again

    def __init__(self, rate: float, monotonic=time.monotonic):
        self.rate, self.monotonic = rate, monotonic
        self._buckets: dict[int, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: int) -> Optional[int]:
        if self.rate <= 0:
            return None
        now = self.monotonic()
        with self._lock:
            if len(self._buckets) > self.MAX_KEYS:
                self._buckets.clear()
            tokens, at = self._buckets.get(key, (self.rate, now))
            tokens = min(self.rate, tokens + (now - at) * self.rate)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                return None
            self._buckets[key] = (tokens, now)
        return max(1, int((1 - tokens) / self.rate + 0.999))


class Admission:
    """The two budgets of every source: `rate` signed deliveries a second, `bad_rate`
    deliveries with a bad signature a second (0: no limit)."""

    def __init__(self, rate: float = 0, bad_rate: float = 0):
        self.signed_buckets, self.bad_buckets = RateBuckets(rate), RateBuckets(bad_rate)

    def signed(self, source_id: int) -> None:
        """One correctly signed delivery (or one to a source without a signature);
        RateLimited when the source's rate is spent."""
        wait = self.signed_buckets.take(source_id)
        if wait is not None:
            raise _limited("this source takes no more deliveries per second; the provider "
                           "resends", wait, "rate")

    def bad_signature(self, source_id: int) -> None:
        """One delivery whose signature is missing or wrong: returns when it may be told so
        (401); RateLimited when the source's bad-signature budget is spent."""
        wait = self.bad_buckets.take(source_id)
        if wait is not None:
            raise _limited("too many deliveries with a missing or wrong signature for this "
                           "source; check the secret the sender signs with", wait,
                           "invalid_signatures")


def _limited(message: str, wait: int, reason: str) -> errors.RateLimited:
    return errors.RateLimited(message, headers={"Retry-After": str(wait)},
                              details={"reason": reason, "retry_after_seconds": wait})
