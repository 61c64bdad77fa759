"""The wire contract as pydantic models: requests are validated here, and /openapi.json is
generated from these same models. Strict types (no "5" for 5) and unknown fields refused: a
misspelt `ttl` must not silently fall back to the default window.
"""
from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal, Optional

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from . import versions
from .settings import MAX_LEASE_SECONDS, MAX_TTL_SECONDS

_CONTROL_OR_SURROGATE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # Unicode Cc and Cs


def _no_control(value: str) -> str:
    if _CONTROL_OR_SURROGATE.search(value):
        raise ValueError("must not contain control characters or lone surrogates")
    return value


def _printable(value: str) -> str:
    if not value.isprintable():
        raise ValueError("must be printable characters")
    return value


Scope = Annotated[str, StringConstraints(min_length=1, max_length=128,
                                         pattern=r"^[A-Za-z0-9_.:\-]+$")]
Key = Annotated[str, StringConstraints(min_length=1, max_length=512),
                AfterValidator(_no_control)]
Fingerprint = Annotated[str, StringConstraints(min_length=1, max_length=256),
                        AfterValidator(_printable)]
LeaseToken = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Text128 = Annotated[str, StringConstraints(min_length=1, max_length=128),
                    AfterValidator(_no_control)]
Text256 = Annotated[str, StringConstraints(min_length=1, max_length=256),
                    AfterValidator(_no_control)]
def _version(value: int | str) -> int | str:
    versions.parse(value)  # ValueError with the reason
    return value


Version = Annotated[int | str, AfterValidator(_version),
                    Field(description="An integer 0..2^63-1, or an RFC 3339 timestamp with Z "
                                      "or an offset (compared as a UTC instant).")]
TtlSeconds = Annotated[int, Field(ge=1, le=MAX_TTL_SECONDS)]
LeaseSeconds = Annotated[int, Field(ge=1, le=MAX_LEASE_SECONDS)]


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class RecordRef(_Body):
    scope: Scope
    key: Key


class _FingerprintSource(_Body):
    payload: Any = Field(None, description="Any I-JSON value; hashed (RFC 8785, SHA-256), "
                                           "never stored.")
    fingerprint: Optional[Fingerprint] = None
    version: Optional[Version] = None

    @model_validator(mode="after")
    def _one_fingerprint_source(self):
        if self.payload is not None and self.fingerprint is not None:
            raise ValueError("send either payload or fingerprint, not both")
        return self


class ClaimRequest(_FingerprintSource):
    scope: Scope
    key: Key
    ttl_seconds: Optional[TtlSeconds] = Field(None, description="Default from config (72 h).")
    lease_seconds: Optional[LeaseSeconds] = Field(None, description="Default 300.")
    on_stale: Literal["reconcile", "retry"] = "reconcile"


class BatchItem(_FingerprintSource):
    key: Key


class BatchClaimRequest(_Body):
    scope: Scope
    items: Annotated[list[BatchItem], Field(min_length=1, max_length=1000)]
    ttl_seconds: Optional[TtlSeconds] = None
    lease_seconds: Optional[LeaseSeconds] = None
    on_stale: Literal["reconcile", "retry"] = "reconcile"


class ResultIn(_Body):
    resource_id: Optional[Text256] = None
    status_code: Optional[Annotated[int, Field(ge=100, le=599)]] = None
    body: Any = Field(None, description="Any JSON, at most 256 KiB in canonical form.")


class CompleteRequest(RecordRef):
    lease_token: LeaseToken
    state: Literal["succeeded", "failed"]
    result: Optional[ResultIn] = None


class ReleaseRequest(RecordRef):
    lease_token: LeaseToken
    reason: Optional[Annotated[str, StringConstraints(max_length=512),
                               AfterValidator(_no_control)]] = None


class ExtendRequest(RecordRef):
    lease_token: LeaseToken
    lease_seconds: LeaseSeconds
    checkpoint: Optional[Text128] = None
    resource_id: Optional[Text256] = None


class ExpireRequest(RecordRef):
    pass


class ResolveRequest(RecordRef):
    action: Literal["mark_succeeded", "mark_failed", "release", "dismiss"]
    review_id: Optional[Annotated[int, Field(ge=1)]] = None
    result: Optional[ResultIn] = Field(None, description="With mark_succeeded or mark_failed.")


class ReviewsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)  # query strings
    state: Literal["open", "resolved"] = "open"
    kind: Optional[Literal["fingerprint_mismatch", "stale_lease"]] = None
    scope: Optional[Scope] = None
    key: Optional[Key] = None
    min_age_seconds: Annotated[int, Field(ge=0, le=10 * 365 * 86_400)] = 0
    limit: Annotated[int, Field(ge=1, le=500)] = 50
    cursor: Optional[Annotated[str, StringConstraints(max_length=200)]] = None


class ReportQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    date: dt.date


class LookupQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)  # query strings: "5" is 5
    scope: Scope
    key: Key
    wait: Optional[Annotated[int, Field(ge=1, le=30)]] = None


# --- responses ----------------------------------------------------------------------------

class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Checkpoint(_Out):
    step: Optional[str]
    resource_id: Optional[str]
    at: str


class ResultOut(_Out):
    resource_id: Optional[str] = None
    status_code: Optional[int] = None
    body: Any = None


class ReviewOut(_Out):
    id: int
    kind: Literal["fingerprint_mismatch", "stale_lease"]
    scope: str
    key: str
    state: Literal["open", "resolved"]
    opened_at: str
    count: int
    resolution: Optional[str]
    updated_at: str
    resolved_at: Optional[str]
    resolved_by: Optional[str]
    original_fingerprint: Optional[str]
    refused_fingerprints: list[str]


class RecordOut(_Out):
    scope: str
    key: str
    state: Literal["in_progress", "succeeded", "failed", "released", "needs_reconciliation"]
    fingerprint: Optional[str]
    version: Optional[int | str]
    attempt: int
    first_seen_at: str
    last_seen_at: str
    expires_at: str
    lease_expires_at: Optional[str]
    duplicate_count: int
    checkpoint: Optional[Checkpoint]
    result: Optional[ResultOut]
    review: Optional[ReviewOut]


class ReviewItem(ReviewOut):
    record: Optional[RecordOut]


class ReviewsResponse(_Out):
    reviews: list[ReviewItem]
    next_cursor: Optional[str]


class ResolveResponse(_Out):
    record: RecordOut
    closed_reviews: list[int]


class ScopeReport(_Out):
    scope: str
    claimed: int
    succeeded: int
    failed: int
    released: int
    taken_over: int
    resolved: int
    in_progress: int
    waiting_for_review: int
    duplicates_suppressed: int
    mismatches: int
    shared_resource_ids: list[dict[str, Any]]


class ReportResponse(_Out):
    date: str
    generated_at: str
    scopes: list[ScopeReport]


class ErrorDetail(_Out):
    code: str
    message: str
    details: dict[str, Any]


class ErrorResponse(_Out):
    error: ErrorDetail
    outcome: Optional[str] = None
    record: Optional[RecordOut] = None


class ClaimResponse(_Out):
    outcome: Literal["acquired", "replay", "in_progress", "needs_reconciliation",
                     "fingerprint_mismatch"]
    record: RecordOut
    lease_token: Optional[str] = None
    attempt: Optional[int] = None
    error: Optional[ErrorDetail] = None


class BatchItemResult(_Out):
    outcome: Optional[Literal["acquired", "replay", "in_progress", "needs_reconciliation",
                              "fingerprint_mismatch"]] = None
    record: Optional[RecordOut] = None
    lease_token: Optional[str] = None
    attempt: Optional[int] = None
    error: Optional[ErrorDetail] = None


class BatchClaimResponse(_Out):
    results: list[BatchItemResult]


class RecordResponse(_Out):
    record: RecordOut


class Health(_Out):
    status: str
