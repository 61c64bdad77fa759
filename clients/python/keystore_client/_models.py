"""Typed views of what the service returns: a record, its result, a claim's answer.

All are frozen dataclasses built from docs/api.md's JSON; times are aware UTC datetimes.
Unknown fields are ignored, so a newer service with more fields does not break old clients.
"""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional, Union

FINISHED = ("succeeded", "failed")
# 24 random bytes are 32 base64url characters and 192 random bits: over docs/api.md's
# floor of 128 bits for a proposed lease token (`lt_` + 22-64 of A-Z a-z 0-9 _ -).
LEASE_TOKEN_BYTES = 24
_PROPOSED_TOKEN = re.compile(r"lt_[A-Za-z0-9_-]{22,64}")
Version = Union[int, str]  # as the service shows it: the integer, or RFC 3339 UTC with `Z`
VersionLike = Union[int, str, datetime, None]  # what a claim may send


def parse_time(value: Optional[str]) -> Optional[datetime]:
    """An RFC 3339 UTC time with `Z` (as the service writes it) as an aware datetime."""
    if value is None:
        return None
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    return datetime.fromisoformat(value)


def version_json(value: VersionLike) -> Optional[Version]:
    """A claim's `version` on the wire. An int (0 .. 2^63-1) and an RFC 3339 string pass as
    they are (the service checks them); an aware datetime becomes RFC 3339 in UTC with `Z`
    (microseconds when non-zero). Raises TypeError for other types (bool, float) and
    ValueError for a naive datetime: its instant is unknown."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, datetime)):
        raise TypeError(f"a version is an int, an RFC 3339 str or an aware datetime, not "
                        f"{type(value).__name__}")
    if isinstance(value, int):
        return int(value)
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("a datetime version must carry a timezone")
    utc = value.astimezone(timezone.utc)
    fraction = f".{utc.microsecond:06d}" if utc.microsecond else ""
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def new_lease_token() -> str:
    """A lease token to propose with a claim: `lt_` + 32 base64url characters from the
    operating system's CSPRNG. Make one per logical operation and send it again with every
    repeat of that operation's claim: a repeat after a lost answer then resumes the attempt
    the first claim acquired instead of meeting it as `in_progress`."""
    return "lt_" + secrets.token_urlsafe(LEASE_TOKEN_BYTES)


def proposed_token(value: Optional[str]) -> str:
    """`value` if it is a well-formed proposed lease token, a new one if None; ValueError
    otherwise (before any request: the service would refuse it with 400)."""
    if value is None:
        return new_lease_token()
    if not isinstance(value, str) or not _PROPOSED_TOKEN.fullmatch(value):
        raise ValueError("a lease token to propose is lt_ and 22-64 of A-Z a-z 0-9 _ - "
                         "(make one with new_lease_token())")
    return value


def _shown_version(value: Any) -> Optional[Version]:
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Result:
    """What a finished operation produced; every field is optional."""

    resource_id: Optional[str] = None
    status_code: Optional[int] = None
    body: Any = None

    @classmethod
    def from_json(cls, data: Optional[dict]) -> Optional[Result]:
        if data is None:
            return None
        return cls(data.get("resource_id"), data.get("status_code"), data.get("body"))

    def to_json(self) -> dict:
        """The wire form: only the fields that are set."""
        out: dict = {}
        if self.resource_id is not None:
            out["resource_id"] = self.resource_id
        if self.status_code is not None:
            out["status_code"] = self.status_code
        if self.body is not None:
            out["body"] = self.body
        return out


@dataclass(frozen=True)
class Checkpoint:
    """How far an unfinished multi-step operation got (set through `extend`)."""

    step: Optional[str]
    resource_id: Optional[str]
    at: Optional[datetime]


@dataclass(frozen=True)
class Record:
    """The stored record of one (scope, key), as the service returned it."""

    scope: str
    key: str
    state: str  # in_progress | succeeded | failed | released | needs_reconciliation
    fingerprint: Optional[str]
    version: Optional[Version]  # the integer, or the timestamp as RFC 3339 UTC (`Z`, to the ns)
    attempt: int
    first_seen_at: Optional[datetime]
    last_seen_at: Optional[datetime]
    expires_at: Optional[datetime]
    lease_expires_at: Optional[datetime]
    duplicate_count: int
    checkpoint: Optional[Checkpoint]
    result: Optional[Result]
    review: Optional[dict]

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    @property
    def version_time(self) -> Optional[datetime]:
        """A timestamp version as an aware UTC datetime (cut to microseconds; `version`
        keeps the exact value); None for an integer version or none."""
        if not isinstance(self.version, str):
            return None
        text = self.version
        if "." in text:  # datetime holds microseconds: keep six digits of the fraction
            head, fraction = text[:-1].split(".", 1)
            text = f"{head}.{fraction[:6].ljust(6, '0')}Z"
        return parse_time(text)

    @classmethod
    def from_json(cls, data: dict) -> Record:
        cp = data.get("checkpoint")
        return cls(
            scope=data["scope"], key=data["key"], state=data["state"],
            fingerprint=data.get("fingerprint"), version=_shown_version(data.get("version")),
            attempt=data.get("attempt", 0),
            first_seen_at=parse_time(data.get("first_seen_at")),
            last_seen_at=parse_time(data.get("last_seen_at")),
            expires_at=parse_time(data.get("expires_at")),
            lease_expires_at=parse_time(data.get("lease_expires_at")),
            duplicate_count=data.get("duplicate_count", 0),
            checkpoint=None if cp is None else Checkpoint(
                cp.get("step"), cp.get("resource_id"), parse_time(cp.get("at"))),
            result=Result.from_json(data.get("result")),
            review=data.get("review"),
        )


@dataclass(frozen=True)
class Claimed:
    """The answer to a claim: `acquired` (you hold the lease: act, then complete or release)
    or `replay` (finished before: here is its record and result; do nothing).

    Built from the shape docs/api.md gives for a single claim and for each item of a batch
    claim (`BatchResult`, a subclass, is one item's answer, refused outcomes included);
    refused outcomes of a single claim are raised as errors instead (`InProgress`,
    `NeedsReconciliation`, `FingerprintMismatch`).
    """

    outcome: str
    record: Record
    lease_token: Optional[str] = None
    attempt: Optional[int] = None
    resumed: bool = False  # acquired again: this operation's own claim, whose answer was lost

    @property
    def acquired(self) -> bool:
        return self.outcome == "acquired"

    @property
    def replayed(self) -> bool:
        return self.outcome == "replay"

    @property
    def result(self) -> Optional[Result]:
        return self.record.result

    @classmethod
    def from_json(cls, data: dict) -> Claimed:
        return cls(data["outcome"], Record.from_json(data["record"]), data.get("lease_token"),
                   data.get("attempt"), data.get("resumed") is True)
