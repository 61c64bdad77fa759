"""Seats for requests that wait (long-poll lookups, claim-and-wait): a bounded share of a
worker's threads, and a bounded share of those per token.

A waiting request holds one gthread thread for up to 30 s. Without a bound, ten long polls
on one record held every thread of a 2 x 4 server and /healthz took 5.5 s for every tenant
(issue 13, item 4). A request that finds no free seat does not wait: the caller answers at
once with what it has (the record as it is), with a Retry-After that says when to ask again.
"""
from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager


class WaitSeats:
    def __init__(self, per_worker: int, per_token: int):
        """`per_worker` seats in this process, at most `per_token` of them for one token
        (0 turns waiting off)."""
        self.per_worker, self.per_token = per_worker, min(per_token, per_worker)
        self._taken: Counter = Counter()
        self._total = 0
        self._lock = threading.Lock()

    @classmethod
    def for_threads(cls, threads: int, share: float, token_share: float) -> WaitSeats:
        """`share` of a worker's `threads` may wait (at least one when share > 0, never all
        of them when there are two or more), and `token_share` of those seats per token."""
        seats = min(max(1, int(threads * share)), threads - 1) if share > 0 else 0
        return cls(seats, max(1, int(seats * token_share)) if seats else 0)

    @contextmanager
    def seat(self, token: object) -> Iterator[bool]:
        """True (and a seat held until the block ends) if the caller may wait."""
        with self._lock:
            free = self._total < self.per_worker and self._taken[token] < self.per_token
            if free:
                self._total += 1
                self._taken[token] += 1
        try:
            yield free
        finally:
            if free:
                with self._lock:
                    self._total -= 1
                    self._taken[token] -= 1
                    if not self._taken[token]:
                        del self._taken[token]

    @property
    def waiting(self) -> int:
        return self._total
