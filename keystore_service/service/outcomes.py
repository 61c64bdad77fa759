"""What the use cases answer: a claim's typed outcome, and the errors that refuse a call.

A claim answers Claimed (acquired or replay) or raises the refusal of its outcome; a call of
the holder, a lookup or an expiry raises the error of its verdict. Each error carries the
record as it now is, where docs/api.md shows it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from keystore_service import errors
from keystore_service.domain import records as domain
from keystore_service.domain.records import Micros, Outcome, Record, Verdict
from keystore_service.service.phases import Refused


@dataclass(frozen=True, slots=True)
class Claimed:
    outcome: Outcome  # ACQUIRED or REPLAY; the other outcomes are raised
    record: Record
    lease_token: Optional[str] = None
    resumed: bool = False  # the claimant's own attempt, found again (its answer was lost)
    late: Optional[domain.Trace] = None  # acquired, but a late repeat of this trace


class LateRepeat(errors.NeedsReconciliation):
    """A late repeat held for a person (on_late_repeat=review): 409 needs_reconciliation
    with the record (and its late_repeat review), and the trace it repeats, which the API
    renders into details.late_repeat."""

    def __init__(self, record: Record, trace: domain.Trace):
        super().__init__("the key came back after its window with the fingerprint it had: "
                         "probably the old event sent again; a person decides", record=record,
                         outcome=Outcome.NEEDS_RECONCILIATION.value)
        self.trace = trace


_VERDICT_ERRORS = {
    Verdict.NOT_FOUND: errors.NotFound, Verdict.EXPIRED: errors.Expired,
    Verdict.LEASE_LOST: errors.LeaseLost, Verdict.ALREADY_COMPLETED: errors.AlreadyCompleted,
}


def answer(outcome: Outcome, record: Record, now: Micros) -> Union[Claimed, Refused]:
    """A claim that did not acquire: a replay, or its refusal."""
    if outcome is Outcome.REPLAY:
        return Claimed(Outcome.REPLAY, record)
    return Refused(refusal(outcome, record, now))


def refusal(outcome: Outcome, record: Record, now: Micros) -> errors.KeystoreError:
    """The error that answers a refused claim, carrying the record as it now is."""
    if outcome is Outcome.VERSION_KIND_CONFLICT:
        return errors.InvalidRequest(
            "this record's versions are of the other kind (integer or timestamp)",
            details={"field": "version", "stored_kind": record.version_kind}, record=record)
    if outcome is Outcome.IN_PROGRESS:
        seconds = domain.retry_after_seconds(record, now)
        return errors.InProgress(record=record, outcome=outcome.value,
                                 details={"retry_after_seconds": seconds},
                                 headers={"Retry-After": str(seconds)})
    if outcome is Outcome.NEEDS_RECONCILIATION:
        return errors.NeedsReconciliation(record=record, outcome=outcome.value)
    return errors.FingerprintMismatch(record=record, outcome=outcome.value)


def verdict_error(verdict: Verdict, record: Optional[Record], now: Micros
                  ) -> errors.KeystoreError:
    """The error of a holder's call, a lookup or an expiry refused by `verdict`."""
    if verdict is Verdict.IN_PROGRESS:
        seconds = domain.retry_after_seconds(record, now)
        return errors.InProgress("a live lease holds the record; resolve it first",
                                 record=record, details={"retry_after_seconds": seconds},
                                 headers={"Retry-After": str(seconds)})
    shown = record if verdict in (Verdict.LEASE_LOST, Verdict.ALREADY_COMPLETED) else None
    return _VERDICT_ERRORS[verdict](record=shown)
