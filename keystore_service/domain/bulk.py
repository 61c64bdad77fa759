"""Bulk actions over deliveries (docs/api.md, "Bulk actions"): the words, and the event-type
glob as a rule of its own (pure: storage/bulk.py turns it into SQL)."""
from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    RUNNING = "running"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


class BulkAction(StrEnum):
    REDELIVER = "redeliver"  # a delivered or failed event is forwarded again (its identity)
    RETRY = "retry"  # a queued event becomes due now
    DISMISS = "dismiss"  # a failed event's delivery_failed review closes; it stays failed


JOB_STATES = tuple(s.value for s in JobState)
ACTIONS = tuple(a.value for a in BulkAction)
ITEM_OUTCOMES = ("done", "skipped")
MAX_GLOB_CHARS = 256  # a type is at most 128 code points; room for wildcards around it


def glob_parts(pattern: str) -> list[str]:
    """The glob `pattern` as literal runs and wildcards: "*" (any run, also empty; "**" is
    one "*") and "?" (one character); every other character is itself, "[" too (no classes:
    types such as "a[1]" match as written)."""
    parts: list[str] = []
    literal = ""
    for ch in pattern:
        if ch in "*?":
            if literal:
                parts.append(literal)
                literal = ""
            if not (ch == "*" and parts and parts[-1] == "*"):
                parts.append(ch)
        else:
            literal += ch
    if literal:
        parts.append(literal)
    return parts


def glob_matches(pattern: str, value: str) -> bool:
    """The glob's meaning (the same as glob_parts' SQL), in len(pattern) * len(value) steps:
    a regex of several "*" backtracks without bound (`*a*a*a*a*a*b` took 5 s against a
    128-character type), and a destination's filter runs this for every event."""
    p = v = 0
    star, resume = -1, 0
    while v < len(value):
        if p < len(pattern) and pattern[p] == "*":
            star, resume, p = p, v, p + 1
        elif p < len(pattern) and pattern[p] in ("?", value[v]):
            p, v = p + 1, v + 1
        elif star >= 0:  # the last "*" takes one more character, and the rest is tried again
            resume += 1
            p, v = star + 1, resume
        else:
            return False
    return set(pattern[p:]) <= {"*"}


class Filter:
    """Which events a bulk action takes (all of those given; times in micros, the range
    `received_after <= received_at < received_before`). Checked where it is made (the API's
    schema); here only its values."""

    __slots__ = ("source", "state", "event_type", "received_after", "received_before",
                 "last_error", "destination")

    def __init__(self, source: str | None = None, state: str | None = None,
                 event_type: str | None = None, received_after: int | None = None,
                 received_before: int | None = None, last_error: str | None = None,
                 destination: str | None = None):
        self.source, self.state, self.event_type = source, state, event_type
        self.received_after, self.received_before = received_after, received_before
        self.last_error, self.destination = last_error, destination

    def empty_range(self) -> bool:
        return (self.received_after is not None and self.received_before is not None
                and self.received_after >= self.received_before)
