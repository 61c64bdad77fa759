"""The gateway's answers (sources, deliveries), as /openapi.json publishes them; the requests
they answer are gateway_schemas.py's."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from keystore_service.domain.deliveries import DELIVERY_STATES
from keystore_service.web.api.route_schemas import FilterSpec, OrderingSpec, RateSpec
from keystore_service.web.api.schemas import _Out


class DestinationOut(_Out):
    url: str
    header_names: list[str]
    has_secret: Optional[bool]  # null when the source is broken
    timeout_seconds: int
    retry_statuses: list[int]
    delivered_header: Optional[str]
    rate: Optional[RateSpec] = Field(None, description=(
        "the destination's rate in its normal form; null: forwarded as fast as max_in_flight "
        "lets"))
    filter: Optional[FilterSpec] = Field(description=(
        "the destination's filter in its normal form (only the parts given); null: it takes "
        "every event"))
    ordering: Optional[OrderingSpec] = Field(description=(
        "the destination's ordering per key in its normal form; null: none"))


class PausedOut(_Out):
    by: Literal["operator", "destination"]
    until: Optional[str] = Field(description="null: until resumed (an operator's pause)")
    reason: Optional[str] = Field(description=(
        "the operator's reason, or the destination's answer (e.g. HTTP 503)"))


class NamedDestinationOut(DestinationOut):
    name: str
    max_in_flight: int
    health: Literal["ok", "failing", "broken"]
    paused_until: Optional[str] = Field(description="a Retry-After pause of this destination")
    paused: Optional[PausedOut] = Field(description=(
        "this destination's pause, an operator's or its own Retry-After; null: it forwards"))
    last_error: Optional[str]
    last_error_at: Optional[str]


class QueueOut(_Out):
    queued: int
    delivering: int
    held: int = Field(description="events with a changed body held for a person (a review)")
    failed: int
    oldest_queued_at: Optional[str]
    next_attempt_at: Optional[str] = Field(description=(
        "the earliest next attempt of the queued events (a pause holds them past it)"))


class SourceOut(_Out):
    name: str
    provider: str
    state: Literal["active", "disabled"]
    health: Literal["ok", "failing", "broken"] = Field(description=(
        "ok; failing: its newest forward failed; broken: no configured key opens its "
        "secrets (its ingest answers 503; ingest_url, secrets and has_secret are null)"))
    ingest_url: Optional[str]
    destination: DestinationOut = Field(description="the first of `destinations`")
    destinations: list[NamedDestinationOut]
    signature: Optional[dict[str, Any]] = None
    event_id: Optional[dict[str, Any]] = None
    event_type: Optional[dict[str, Any]] = None
    secrets: Optional[int] = Field(
        description="how many signing secrets are set (never the secrets); null if broken")
    ttl_seconds: int
    retry_window_seconds: int
    max_in_flight: int
    keep_body_seconds: int
    max_pause_seconds: int
    alert_after_seconds: int
    backlog_alert_seconds: int
    created_at: str
    updated_at: str
    paused_until: Optional[str]
    last_error: Optional[str]
    last_error_at: Optional[str]
    paused: Optional[PausedOut] = Field(description="null when the source forwards")
    queue: QueueOut


class SourceResponse(_Out):
    source: SourceOut


class SourcesResponse(_Out):
    sources: list[SourceOut]


class AttemptOut(_Out):
    at: str
    status_code: Optional[int] = None
    error: Optional[str] = None
    duration_ms: int


class DeliveryOut(_Out):
    source: str
    event_id: str
    state: Literal[DELIVERY_STATES]
    received_at: str
    event_type: Optional[str]
    next_attempt_at: Optional[str]
    delivered_at: Optional[str]
    attempts: list[AttemptOut]
    attempt_count: int
    body_kept: bool
    # a queued event an ordered destination holds: the event id of its key's one it waits on
    waiting_on: Optional[str] = None
    destination: str = Field("default", description="the name of the source's destination")


class DeliveriesResponse(_Out):
    deliveries: list[DeliveryOut]
    next_cursor: Optional[str]


class DeliveryResponse(_Out):
    delivery: DeliveryOut


class RetryAnswer(_Out):
    due: int = Field(description="how many of the source's queued events are due now")


class IngestAnswer(_Out):
    status: Literal["accepted", "duplicate", "held"]
    event_id: str
