"""Outbound sends (issue 28): the states of a send, what one request came to, a check's
verdicts, and the contract's table that classifies an answer. Pure: no I/O, no clock."""
from __future__ import annotations

from enum import StrEnum
from typing import Optional


class SendState(StrEnum):
    QUEUED = "queued"  # waiting for its (next) request
    SENDING = "sending"  # a request in flight under a lease
    CHECKING = "checking"  # its outcome is unknown: the connection's check decides
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # a permanent refusal, or the window ended with no unknown attempt
    UNRESOLVED = "unresolved"  # needs_reconciliation: a person decides (send_unknown review)


class Class(StrEnum):
    """What one request came to, by the contract's table."""

    SUCCEEDED = "succeeded"  # 2xx
    FAILED = "failed"  # a permanent refusal: 4xx but 408, 409, 425, 429
    RETRY = "retry"  # not sent, or 408/409/425/429/503: again with the same key
    UNKNOWN = "unknown"  # a timeout or reset after sending, any other 5xx


class Verdict(StrEnum):
    FOUND = "found"
    ABSENT = "absent"
    UNCLEAR = "unclear"


class OnAbsent(StrEnum):
    RELEASE = "release"
    REVIEW = "review"


SEND_STATES = tuple(SendState)
SETTLED = frozenset({SendState.SUCCEEDED, SendState.FAILED, SendState.UNRESOLVED})
CLASSES = tuple(Class)
CHECK_VERDICTS = tuple(Verdict)
ON_ABSENT = tuple(OnAbsent)
CHECK_TRIES = 3  # an unclear check is tried this often before a person is asked
RETRIED_STATUSES = frozenset({408, 409, 425, 429, 503})


def classify(status: Optional[int], sent: bool) -> Class:
    """The contract's table: `status` None is no answer; `sent` False means no byte of the
    request left (no connection, a refused address), so it cannot have acted."""
    if status is None:
        return Class.UNKNOWN if sent else Class.RETRY
    if 200 <= status < 300:
        return Class.SUCCEEDED
    if status in RETRIED_STATUSES:
        return Class.RETRY
    if 400 <= status < 500:
        return Class.FAILED
    return Class.UNKNOWN  # any other 5xx (and 1xx/3xx: no redirect is followed)
