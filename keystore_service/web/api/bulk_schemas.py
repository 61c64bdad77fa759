"""The wire models of the bulk actions (POST /v1/deliveries/bulk, GET /v1/jobs/<id>),
validated like schemas.py: strict types, unknown fields refused."""
from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, model_validator

from keystore_service.domain import versions
from keystore_service.domain.bulk import ACTIONS, JOB_STATES, Filter
from keystore_service.domain.deliveries import DELIVERY_STATES
from keystore_service.domain.names import NAME_PATTERN
from keystore_service.web.api.gateway_schemas import SourceName, TypeGlob
from keystore_service.web.api.schemas import _Body, _Out

# An Idempotency-Key header: 1-255 visible ASCII characters (a UUID is 36), inner spaces
# allowed; anything else is 400 (it is stored and compared exactly).
KEY_PATTERN = r"^[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?$"


def _instant(value: str) -> str:
    try:
        kind, _ = versions.parse(value)  # RFC 3339 with a zone, ASCII digits, a real date
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    if kind != versions.TIME:
        raise ValueError("an RFC 3339 timestamp with Z or an offset")
    return value


Instant = Annotated[str, StringConstraints(max_length=64), AfterValidator(_instant),
                    Field(json_schema_extra={"format": "date-time"})]


class BulkFilter(_Body):
    source: Optional[SourceName] = None
    destination: Optional[Annotated[str, StringConstraints(pattern=NAME_PATTERN)]] = Field(
        None, description="A destination's name: its deliveries only (a v1.1 source's one "
                          "destination is named default)")
    state: Optional[Literal[DELIVERY_STATES]] = None
    event_type: Optional[TypeGlob] = None
    received_after: Optional[Instant] = Field(None, description="inclusive")
    received_before: Optional[Instant] = Field(None, description=(
        "exclusive; after received_after (else 400: the range would be empty)"))
    last_error: Optional[TypeGlob] = Field(None, description=(
        "A glob over the newest attempt's error (timeout, no connection, HTTP 503, ...); "
        "delivered events have none"))

    @model_validator(mode="after")
    def _range(self) -> BulkFilter:
        if self.received_after and self.received_before and \
                micros(self.received_after) >= micros(self.received_before):
            raise ValueError("received_after must be before received_before")
        return self

    def as_filter(self) -> Filter:
        return Filter(self.source, self.state, self.event_type,
                      micros(self.received_after) if self.received_after else None,
                      micros(self.received_before) if self.received_before else None,
                      self.last_error, self.destination)

    def shown(self) -> dict:
        return self.model_dump(exclude_none=True)


def micros(instant: str) -> int:
    return versions.parse(instant)[1]


class BulkRequest(_Body):
    # Said here for /openapi.json (the API checks it): force belongs to redeliver only.
    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"action": {"enum": ["retry", "dismiss"]}}, "required": ["action"]},
        "then": {"properties": {"force": {"const": False}}}})

    action: Literal[ACTIONS]
    filter: BulkFilter = Field(default_factory=BulkFilter)
    force: bool = Field(False, description="redeliver only: delivered events go out again")
    dry_run: bool = Field(False, description="count only: 200 {matched}")

    @model_validator(mode="after")
    def _force(self) -> BulkRequest:
        if self.force and self.action != "redeliver":
            raise ValueError("force is for redeliver")
        return self


class MatchedResponse(_Out):
    matched: int


class JobOut(_Out):
    id: int
    action: Literal[ACTIONS]
    filter: dict
    force: bool
    state: Literal[JOB_STATES]
    matched: int
    done: int
    skipped: int
    started_at: str
    finished_at: Optional[str]
    url: str = Field(description="the job's page")


class JobResponse(_Out):
    job: JobOut
