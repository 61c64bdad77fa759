"""Bulk actions over deliveries (docs/api.md, "Bulk actions"): the words, and the event-type
glob as a rule of its own (pure: storage/bulk.py turns it into SQL)."""
from __future__ import annotations

import re
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
    """The glob's meaning, for tests and for a check beside the SQL (same parts)."""
    regex = "".join(".*" if p == "*" else "." if p == "?" else re.escape(p)
                    for p in glob_parts(pattern))
    return re.fullmatch(regex, value, re.DOTALL) is not None


class Filter:
    """Which events a bulk action takes (all of those given; times in micros, the range
    `received_after <= received_at < received_before`). Checked where it is made (the API's
    schema); here only its values."""

    __slots__ = ("source", "state", "event_type", "received_after", "received_before",
                 "last_error")

    def __init__(self, source: str | None = None, state: str | None = None,
                 event_type: str | None = None, received_after: int | None = None,
                 received_before: int | None = None, last_error: str | None = None):
        self.source, self.state, self.event_type = source, state, event_type
        self.received_after, self.received_before = received_after, received_before
        self.last_error = last_error

    def empty_range(self) -> bool:
        return (self.received_after is not None and self.received_before is not None
                and self.received_after >= self.received_before)
