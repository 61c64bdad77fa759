"""Typed views of what the service returns: a record, its result, a claim's answer.

All are frozen dataclasses built from the contract's JSON; times are aware UTC datetimes.
Unknown fields are ignored, so a newer service with more fields does not break old clients.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

FINISHED = ("succeeded", "failed")


def parse_time(value: Optional[str]) -> Optional[datetime]:
    """An RFC 3339 UTC time with `Z` (as the service writes it) as an aware datetime."""
    if value is None:
        return None
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    return datetime.fromisoformat(value)


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
    version: Any
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

    @classmethod
    def from_json(cls, data: dict) -> Record:
        cp = data.get("checkpoint")
        return cls(
            scope=data["scope"], key=data["key"], state=data["state"],
            fingerprint=data.get("fingerprint"), version=data.get("version"),
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

    Built from the shape the contract uses for a single claim and for each item of a batch
    claim, so a batch can return one of these per item; refused outcomes of a single claim
    are raised as errors instead (`InProgress`, `NeedsReconciliation`, `FingerprintMismatch`).
    """

    outcome: str
    record: Record
    lease_token: Optional[str] = None
    attempt: Optional[int] = None

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
                   data.get("attempt"))
