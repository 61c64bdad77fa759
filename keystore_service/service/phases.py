"""The one retry-on-conflict loop: get -> decide -> compare-and-set, decided again on a lost race.

As rocket-rides' `atomic_phase`: a use case's step runs in one transaction and returns a typed
outcome, and this module alone interprets it:

    a value      the answer: the transaction commits, the value is returned
    AGAIN        the row changed (or went) under the step, which wrote nothing: read and
                 decide again on the fresh row, at most ROUNDS times, then 503
    Refused(e)   a refusal whose writes stand (a review counted or opened): the transaction
                 commits, then `e` is raised

An error the step raises rolls its transaction back and goes up as it is.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeVar, Union

from keystore_service import errors

T = TypeVar("T")
# Lost compare-and-set races before giving up with 503. Each loss needs another writer that
# committed a change to the same row in between, so 16 in a row is a key under a storm of
# writers, not a slow one; the client (or the provider) sends again later.
ROUNDS = 16
CONTENDED = "too much contention on this key; try again"


class Again:
    """The step lost its compare-and-set (or the row it read was purged): decide again."""

    def __repr__(self) -> str:
        return "AGAIN"


AGAIN = Again()


@dataclass(frozen=True, slots=True)
class Refused:
    """A refusal to raise once the step's transaction has committed (its review stands)."""

    error: errors.KeystoreError


Transaction = Callable[[], AbstractContextManager[Any]]
Step = Callable[[Any], Union[T, Again, Refused]]


def retry_on_conflict(round_: Callable[[], Union[T, Again, Refused]],
                      contended: str = CONTENDED) -> T:
    """`round_()` (which opens its own transactions) until it answers anything but AGAIN,
    at most ROUNDS times, then errors.Unavailable(`contended`); a Refused is raised."""
    for _ in range(ROUNDS):
        outcome = round_()
        if isinstance(outcome, Refused):
            raise outcome.error
        if outcome is not AGAIN:
            return outcome
    raise errors.Unavailable(contended)


def atomic_phase(transaction: Transaction, step: Step[T], contended: str = CONTENDED) -> T:
    """`step(cur)`, each round in a transaction of its own, until it answers (see above)."""
    def round_() -> Union[T, Again, Refused]:
        with transaction() as cur:
            return step(cur)  # commits (an error rolls back)
    return retry_on_conflict(round_, contended)


def through_outages(call: Callable[[], T], seconds: float, sleep: Callable[[float], None]) -> T:
    """`call` again while the database is unavailable (errors.Unavailable), for up to
    `seconds`, pausing 50 ms and doubling up to 1 s.

    Safe because every call repeated here recognises its own earlier write: a claim by
    its new lease token's hash, a complete or release as the same request again. So a
    commit whose answer was lost when the database went away is found, not doubled, and
    the client gets its answer instead of an unknown outcome."""
    deadline = time.monotonic() + seconds
    pause = 0.05
    while True:
        try:
            return call()
        except errors.Unavailable:
            if time.monotonic() + pause > deadline:
                raise
            sleep(pause)
            pause = min(pause * 2, 1.0)
