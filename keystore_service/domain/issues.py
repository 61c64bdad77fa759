"""Issues and their notices, as words and numbers (docs/api.md, "Issues and alerts"): the
kinds, the states, the notice events, the defaults, and the backoff of a notice."""
from __future__ import annotations

from enum import StrEnum

# What an issue is about. `send_unresolved`: a connection's outbound sends wait for a person
# (their outcome unknown, no check settled them).
KINDS = ("delivery_failing", "backlog", "source_broken", "reviews_waiting", "send_unresolved")
ISSUE_STATES = ("open", "acknowledged", "resolved", "ignored")
LIVE_STATES = ("open", "acknowledged")  # the one issue per (tenant, kind, subject)
# A notice: an issue opened, resolved, or still open (a reminder); a channel's test; the
# daily report; and "N more issues" once the hourly bound held some back.
EVENTS = ("opened", "resolved", "reminder", "test", "report", "more")


class NoticeState(StrEnum):
    """Where a notice is in its outbox: due (queued), being sent under a lease, sent, given
    up (failed), held back by the channel's hourly bound, or folded into an "N more"."""

    QUEUED = "queued"
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    HELD = "held"
    FOLDED = "folded"


NOTICE_STATES = tuple(s.value for s in NoticeState)
CHANNEL_KINDS = ("slack", "webhook", "email")

SECOND = 1_000_000
ALERT_AFTER_DEFAULT = 300  # a source's forwards fail 5 minutes before a person is told
BACKLOG_ALERT_DEFAULT = 900  # its oldest queued event waits 15 minutes
REMIND_DEFAULT = 4 * 3600  # a reminder every 4 hours while open and unacknowledged
REMIND_MIN = 5
NOTICES_PER_HOUR = 30  # per channel; beyond it one "N more issues" notice
HOUR = 3600 * SECOND
# A notice is retried for a day (a channel down over a night still gets the morning's news),
# after attempt n waiting min(10 min, 5 s * 2^(n-1)).
NOTICE_GIVE_UP = 86_400 * SECOND
NOTICE_MAX_BACKOFF = 600


def backoff_seconds(attempt: int) -> int:
    return min(NOTICE_MAX_BACKOFF, 5 * 2 ** min(attempt - 1, 16))


def review_subject(scope: str, review_kind: str) -> str:
    """The subject of a reviews_waiting issue: a scope has no `/` (its alphabet)."""
    return f"{scope}/{review_kind}"


def split_review_subject(subject: str) -> tuple[str, str]:
    scope, _, kind = subject.rpartition("/")
    return scope, kind


def delivery_subject(source: str, destination: str, fanout: int) -> str:
    """The subject of a delivery_failing issue: the source of one destination (as v1.1),
    `source/destination` for each destination of a source that has several (a name has no
    `/`: its alphabet)."""
    return source if fanout <= 1 else f"{source}/{destination}"


def split_delivery_subject(subject: str) -> tuple[str, str | None]:
    source, _, destination = subject.partition("/")
    return source, destination or None


def event_type(event: str) -> str:
    """A webhook channel's `type`: issue.opened, issue.resolved, issue.reminder, test."""
    return event if event in ("test", "report", "more") else f"issue.{event}"
