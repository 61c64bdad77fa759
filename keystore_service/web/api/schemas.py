"""docs/api.md's bodies as pydantic models: requests are validated here, and /openapi.json is
generated from these same models. Strict types (no "5" for 5) and unknown fields refused: a
misspelt `ttl` must not silently fall back to the default window. The field types they are
built from are field_types.py's (imported here, so `schemas.Text` and the rest still work).
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from keystore_service.domain.records import HOOK_SCOPE_PREFIX
from keystore_service.web.api.field_types import (
    Fingerprint,
    Int,
    Key,
    LeaseSeconds,
    LeaseToken,
    ProposedToken,
    ReviewKindName,
    Scope,
    Text,
    Text128,
    Text256,
    TtlSeconds,
    Version,
)
from keystore_service.web.api.queries import Cursor, QueryInt, ReportDay


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class RecordRef(_Body):
    scope: Scope
    key: Key


# "Never both": a payload that is not null together with a fingerprint string is refused.
_NOT_BOTH = {"not": {"required": ["payload", "fingerprint"],
                     "properties": {"payload": {"not": {"type": "null"}},
                                    "fingerprint": {"type": "string"}}}}


class _FingerprintSource(_Body):
    model_config = ConfigDict(json_schema_extra=_NOT_BOTH)

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
    lease_token: Optional[ProposedToken] = None
    keep_payload: bool = Field(False, description=(
        "Keep the canonical payload (at most 64 KiB) with the record, so a person can see "
        "what a refused mismatch changed (operators only; deleted with the review / record)."))
    on_late_repeat: Literal["allow", "review"] = Field("allow", description=(
        "A key acquired again after its window with its old fingerprint: allow (acquired, "
        "marked late_repeat) or review (409 needs_reconciliation, a person decides)."))
    wait_seconds: Optional[Int(1, 30)] = Field(None, description=(
        "While another attempt's live lease holds the record, wait up to this long (no "
        "transaction held) and answer by the claim table as it stands then."))


class BatchItem(_FingerprintSource):
    key: Key
    lease_token: Optional[ProposedToken] = None


class BatchClaimRequest(_Body):
    scope: Scope
    items: Annotated[list[BatchItem], Field(min_length=1, max_length=1000)]
    ttl_seconds: Optional[TtlSeconds] = None
    lease_seconds: Optional[LeaseSeconds] = None
    on_stale: Literal["reconcile", "retry"] = "reconcile"


class ResultIn(_Body):
    resource_id: Optional[Text256] = None
    status_code: Optional[Int(100, 599)] = None
    body: Any = Field(None, description="Any JSON, at most 256 KiB in canonical form.")


class CompleteRequest(RecordRef):
    lease_token: LeaseToken
    state: Literal["succeeded", "failed"]
    result: Optional[ResultIn] = None


class ReleaseRequest(RecordRef):
    lease_token: LeaseToken
    reason: Optional[Text(0, 512)] = None


class ExtendRequest(RecordRef):
    lease_token: LeaseToken
    lease_seconds: LeaseSeconds
    checkpoint: Optional[Text128] = None
    resource_id: Optional[Text256] = None


class ExpireRequest(RecordRef):
    pass


_HOOK_SCOPE = "^" + re.escape(HOOK_SCOPE_PREFIX)  # is_hook_scope, as /openapi.json's pattern


class ResolveRequest(RecordRef):
    # Said here for /openapi.json (the API checks them): a result belongs to mark_succeeded or
    # mark_failed only; redeliver is for the gateway's records (hook: scopes), and release is
    # not (it would let a provider's resend in again).
    model_config = ConfigDict(json_schema_extra={"allOf": [
        {"if": {"properties": {"action": {"enum": ["release", "dismiss", "redeliver"]}},
                "required": ["action"]},
         "then": {"properties": {"result": {"type": "null"}}}},
        {"if": {"properties": {"action": {"const": "redeliver"}}, "required": ["action"]},
         "then": {"properties": {"scope": {"pattern": _HOOK_SCOPE}}}},
        {"if": {"properties": {"scope": {"pattern": _HOOK_SCOPE}}, "required": ["scope"]},
         "then": {"properties": {"action": {"not": {"const": "release"}}}}}]})

    action: Literal["mark_succeeded", "mark_failed", "release", "dismiss", "redeliver"] = Field(
        description="redeliver only on a hook: scope; release on any other scope.")
    review_id: Optional[Int(1, 2**63 - 1)] = None
    result: Optional[ResultIn] = Field(None, description="With mark_succeeded or mark_failed.")

    @model_validator(mode="after")
    def _result_goes_with_a_mark(self):
        if self.result is not None and self.action not in ("mark_succeeded", "mark_failed"):
            raise ValueError("a result goes with mark_succeeded or mark_failed")
        return self


class ReviewsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)  # query strings
    state: Literal["open", "resolved"] = "open"
    kind: Optional[ReviewKindName] = None
    scope: Optional[Scope] = None
    key: Optional[Key] = None
    min_age_seconds: QueryInt(0, 10 * 365 * 86_400) = 0  # ten years: older is all of them
    limit: QueryInt(1, 500) = 50
    cursor: Optional[Cursor] = None


class ReportQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    date: ReportDay


class LookupQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)  # query strings: "5" is 5
    scope: Scope
    key: Key
    wait: Optional[QueryInt(1, 30)] = None


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
    kind: ReviewKindName
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
    destination: Optional[str] = None  # a delivery_failed review's destination


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
    kept: Optional[dict[str, Any]] = Field(None, description=(
        "What was kept for a person to compare (operators only): the original and the "
        "refused payload of a mismatch whose claims asked keep_payload; a held webhook's "
        "body and headers; a failed delivery's last answers."))


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
    late_repeats: int
    sent: int = Field(description="Outbound sends queued that day (POST /v1/send)")
    settled_found: int = Field(description="Checks that day that found the effect: the "
                               "record settled without a person")
    settled_absent: int = Field(description="Checks that day that ruled the effect out: a "
                                "send queued again, a claim released (or its review kept)")
    waiting_for_person: int = Field(description="As it stands: open reviews of an unknown "
                                    "outcome (stale_lease, send_unknown) no check settled")
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


class LateRepeatOut(_Out):
    first_seen_at: str
    expired_at: str
    resource_id: Optional[str]


class ClaimResponse(_Out):
    outcome: Literal["acquired", "replay", "in_progress", "needs_reconciliation",
                     "fingerprint_mismatch"]
    record: RecordOut
    lease_token: Optional[str] = None
    attempt: Optional[int] = None
    resumed: Optional[bool] = None
    late_repeat: Optional[LateRepeatOut] = None
    error: Optional[ErrorDetail] = None


class BatchItemResult(_Out):
    outcome: Optional[Literal["acquired", "replay", "in_progress", "needs_reconciliation",
                              "fingerprint_mismatch"]] = None
    record: Optional[RecordOut] = None
    lease_token: Optional[str] = None
    attempt: Optional[int] = None
    resumed: Optional[bool] = None
    error: Optional[ErrorDetail] = None


class BatchClaimResponse(_Out):
    results: list[BatchItemResult]


class RecordResponse(_Out):
    record: RecordOut


class Health(_Out):
    status: str


class WhoAmI(_Out):
    tenant: str
    role: Literal["client", "operator"]
    token: str = Field(description="The token's name (never the token itself).")
