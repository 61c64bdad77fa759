"""The gateway's wire models (sources, deliveries), validated like schemas.py: strict types,
unknown fields refused; /openapi.json is generated from them too."""
from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
)

from keystore_service.domain import versions
from keystore_service.domain.deliveries import DELIVERY_STATES
from keystore_service.domain.names import NAME_PATTERN
from keystore_service.gateway import providers
from keystore_service.gateway.providers import standard
from keystore_service.settings import MAX_TTL_SECONDS
from keystore_service.web.api.queries import Cursor, QueryInt
from keystore_service.web.api.route_schemas import FilterSpec, OrderingSpec, RateSpec
from keystore_service.web.api.schemas import Int, Key, Text, _Body

DAY = 86_400
MAX_REASON = 256  # a pause's reason, in code points: a sentence, not a document
SourceName = Annotated[str, StringConstraints(pattern=NAME_PATTERN), Field(
    description="1-64 of a-z 0-9 _ -, unique per tenant (a disabled source keeps its name): "
                "a name the tenant has already is refused with 400")]
# Header names are RFC 9110 tokens; values printable, no CR/LF (they go into a request).
HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$"
HeaderName = Annotated[str, StringConstraints(pattern=HEADER_NAME)]
HeaderValue = Annotated[str, StringConstraints(max_length=4096,
                                               pattern=r"^[\x20-\x7e\x80-\xff]*$")]
Secret = Text(1, 512, writeOnly=True)
# An event-type filter: `*` any run of characters, `?` one, everything else itself (`[` too).
# Up to 256 characters (a type is at most 128), no control characters.
TypeGlob = Annotated[str, StringConstraints(
    min_length=1, max_length=256, pattern=r"^[^\u0000-\u001f\u007f-\u009f]+$"), Field(
    description="A glob over event types: * matches any characters, ? one; [ and every "
                "other character match themselves; case-sensitive")]


def _known_provider(name: str) -> str:
    if name not in providers.names():
        raise ValueError(f"the provider is one of {', '.join(providers.names())}")
    return name


# The registered provider modules (gateway/providers/): adding one adds it here too.
Provider = Annotated[str, AfterValidator(_known_provider),
                     Field(json_schema_extra={"enum": providers.names()})]
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection",
                              "idempotency-key", "keystore-attempt", "webhook-id",
                              "webhook-timestamp", "webhook-signature"})


def _no_reserved(headers: dict[str, str]) -> dict[str, str]:
    taken = sorted(h for h in headers if h.lower() in RESERVED_HEADERS)
    if taken:
        raise ValueError(f"these headers are the gateway's own: {', '.join(taken)}")
    return headers


# The same rule for /openapi.json: header names are compared without case, a JSON Schema
# pattern cannot ignore case, so each letter is a class of both ("[Hh][Oo][Ss][Tt]").
RESERVED_PATTERN = "^(?:" + "|".join(sorted(
    "".join(f"[{c.upper()}{c}]" if c.isalpha() else c for c in name)
    for name in RESERVED_HEADERS)) + ")$"


def _header_names(schema: dict) -> None:
    """The headers' JSON schema: every name a token and not one of the gateway's own (the
    default, patternProperties, would let any other name through with any value)."""
    value = schema.pop("patternProperties")[HEADER_NAME]
    schema["propertyNames"] = {"pattern": HEADER_NAME, "not": {"pattern": RESERVED_PATTERN}}
    schema["additionalProperties"] = value
    schema["description"] = ("Sent with every forward (the values are sealed; answers show "
                             "the names only). Names are tokens; the gateway's own are "
                             f"refused in any case: {', '.join(sorted(RESERVED_HEADERS))}.")


class Signature(_Body):
    header: HeaderName
    algorithm: Literal["sha256", "sha1"] = "sha256"
    encoding: Literal["hex", "base64"] = "hex"
    prefix: Annotated[str, StringConstraints(max_length=32, pattern=r"^[\x21-\x7e]*$")] = ""


class EventIdRule(_Body):
    header: Optional[HeaderName] = None
    # RFC 6901 pointers without control characters, none twice (generic.validate_config).
    json_: Optional[Annotated[list[Annotated[str, StringConstraints(
        max_length=256, pattern=r"^(/([^~/\u0000-\u001f\u007f-\u009f]|~[01])*)+$")]],
        Field(min_length=1, max_length=8, json_schema_extra={"uniqueItems": True})]] = \
        Field(None, alias="json")


class EventTypeRule(_Body):
    """Where a generic source's event type is: a header, or one JSON pointer."""

    header: Optional[HeaderName] = None
    json_: Optional[Annotated[str, StringConstraints(
        min_length=1, max_length=256,
        pattern=r"^(/([^~/\u0000-\u001f\u007f-\u009f]|~[01])*)+$")]] = Field(None, alias="json")


class Destination(_Body):
    url: Annotated[str, StringConstraints(min_length=1, max_length=2048)] = Field(description=(
        "http:// or https:// with a host and no credentials. Refused with 400 when the "
        "address rules refuse it (docs/webhooks/README.md): where a name leads is known only by "
        "resolving it, which no schema can do"))
    headers: Annotated[dict[HeaderName, HeaderValue],
                       Field(max_length=32, json_schema_extra=_header_names),
                       AfterValidator(_no_reserved)] = Field(default_factory=dict)
    secret: Optional[Text(1, 512, writeOnly=True, pattern=standard.SECRET_PATTERN)] = Field(
        None, description="whsec_ + base64 of 24-64 bytes: forwards are signed (Standard "
                          "Webhooks)")
    timeout_seconds: Int(1, 60) = 10
    retry_statuses: Annotated[list[Int(400, 499)], Field(max_length=20)] = Field(
        default_factory=list, description="4xx answers to retry too (e.g. [404] for an n8n "
        "webhook while n8n starts and has not registered it yet)")
    delivered_header: Optional[HeaderName] = Field(None, description=(
        "A 2xx counts as delivered only when the answer carries this header (set by the "
        "workflow's own response), so a platform's 'starting up' 200 is retried"))
    rate: Optional[RateSpec] = None
    filter: Optional[FilterSpec] = None
    ordering: Optional[OrderingSpec] = None


class NamedDestination(Destination):
    """One of a source's `destinations`: a Destination with its name and its own
    max_in_flight."""

    name: Annotated[str, StringConstraints(pattern=NAME_PATTERN), Field(
        description="1-64 of a-z 0-9 _ -, unique in the source's list; deliveries listings, "
                    "redelivery, pauses and metrics name it")]
    max_in_flight: Optional[Int(1, 256)] = Field(None, description=(
        "Forwards to it at once across every relay; default: the source's max_in_flight"))


Destinations = Annotated[list[NamedDestination], Field(min_length=1, max_length=10, description=(
    "Up to 10, each a delivery of every event (its filter may decline it: `filtered`); the "
    "record succeeds once each delivered, filtered or superseded. The first is what "
    "`destination` shows. Give `destination` or `destinations`, not both"))]


MAX_PAUSE = ("A 429 or 503 with Retry-After pauses the source's forwarding for at most this "
             "long (1 s to a day): a longer Retry-After is cut to it")


ALERT_AFTER = ("Forwards failing this long (0 to a day; 0: at once) open a delivery_failing "
               "issue")
BACKLOG_ALERT = ("An oldest queued event this old (0 to 7 days; 0: at once) opens a backlog "
                 "issue")


TTL = ("At least retry_window_seconds plus a day (86,400), else 400: a schema cannot compare "
       "two fields. Default: the provider's retry window or retry_window_seconds, whichever is "
       "longer, plus a day")


# A new source has `destination` or `destinations`, not both; a change, at most one of them.
_ONE_FORM = {"oneOf": [
    {"required": ["destination"], "properties": {"destination": {"type": "object"},
                                                 "destinations": {"type": "null"}}},
    {"required": ["destinations"], "properties": {"destinations": {"type": "array"},
                                                  "destination": {"type": "null"}}}]}
_NOT_BOTH = {"not": {"required": ["destination", "destinations"], "properties": {
    "destination": {"type": "object"}, "destinations": {"type": "array"}}}}


class SourceCreate(_Body):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True,
                              json_schema_extra=_ONE_FORM)
    name: SourceName
    provider: Provider
    secrets: Optional[Annotated[list[Secret], Field(min_length=1, max_length=2)]] = None
    signature: Optional[Signature] = None
    event_id: Optional[EventIdRule] = None
    event_type: Optional[EventTypeRule] = None
    destination: Optional[Destination] = Field(None, description=(
        "The one-destination form (its name is `default`); or give `destinations`"))
    destinations: Optional[Destinations] = None
    ttl_seconds: Optional[Int(1, MAX_TTL_SECONDS)] = Field(None, description=TTL)
    retry_window_seconds: Int(60, 30 * DAY) = 3 * DAY
    max_in_flight: Int(1, 256) = 4
    keep_body_seconds: Int(0, 90 * DAY) = 7 * DAY
    max_pause_seconds: Int(1, DAY) = Field(3600, description=MAX_PAUSE)
    alert_after_seconds: Int(0, DAY) = Field(300, description=ALERT_AFTER)
    backlog_alert_seconds: Int(0, 7 * DAY) = Field(900, description=BACKLOG_ALERT)


# PATCH names a stored source: its provider's rules (SourceCreate_<provider>) apply, which
# the schema of this request cannot know.
BY_PROVIDER = ("Checked against the source's provider, as in its SourceCreate_<provider> "
               "schema; 400 if that provider's rules refuse it")


class SourceChange(_Body):
    """PATCH: what is given changes; the name and provider do not."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True,
                              json_schema_extra=_NOT_BOTH)

    secrets: Optional[Annotated[list[Secret], Field(min_length=1, max_length=2)]] = Field(
        None, description=BY_PROVIDER)
    signature: Optional[Signature] = Field(None, description=BY_PROVIDER)
    event_id: Optional[EventIdRule] = Field(None, description=BY_PROVIDER)
    event_type: Optional[EventTypeRule] = Field(None, description=BY_PROVIDER)
    destination: Optional[Destination] = Field(None, description=(
        "Replaces the first destination (its name stays)"))
    destinations: Optional[Destinations] = Field(None, description=(
        "Replaces the list: a destination is matched by its name (its deliveries and pauses "
        "stay), a new name is added; one left out that has deliveries is refused with 400"))
    ttl_seconds: Optional[Int(1, MAX_TTL_SECONDS)] = Field(None, description=(
        "At least the retry window (given or stored) plus a day, else 400"))
    retry_window_seconds: Optional[Int(60, 30 * DAY)] = None
    max_in_flight: Optional[Int(1, 256)] = None
    keep_body_seconds: Optional[Int(0, 90 * DAY)] = None
    max_pause_seconds: Optional[Int(1, DAY)] = Field(None, description=MAX_PAUSE)
    alert_after_seconds: Optional[Int(0, DAY)] = Field(None, description=ALERT_AFTER)
    backlog_alert_seconds: Optional[Int(0, 7 * DAY)] = Field(None, description=BACKLOG_ALERT)


DestinationName = Annotated[str, StringConstraints(pattern=NAME_PATTERN), Field(
    description="the source's destination; required for an event with several deliveries")]


class Redeliver(_Body):
    source: SourceName
    event_id: Key
    force: bool = False
    destination: Optional[DestinationName] = None


class Retry(_Body):
    """Retry now: the queued event (or, without event_id, every queued event of the
    source) is due at once, whatever its backoff."""

    source: SourceName
    event_id: Optional[Key] = None
    destination: Optional[DestinationName] = None


def _instant(value: str) -> str:
    kind, _ = versions.parse(value)  # RFC 3339 with a zone, ASCII digits, a real date
    if kind != versions.TIME:
        raise ValueError("an RFC 3339 timestamp with Z or an offset")
    return value


PausedName = Annotated[str, StringConstraints(pattern=NAME_PATTERN), Field(
    description="one of the source's destinations; absent or null: every one")]


class Pause(_Body):
    until: Optional[Annotated[str, AfterValidator(_instant), Field(json_schema_extra={
        "format": "date-time"})]] = Field(None, description=(
            "RFC 3339 with Z or an offset, in the future and at most a year ahead (else 400: "
            "a schema cannot know the time). Absent or null: paused until resumed"))
    reason: Optional[Text(1, MAX_REASON)] = Field(None, description=(
        "Why, for the other operators (shown on the page and in GET /v1/sources)"))
    destination: Optional[PausedName] = None


class Resume(_Body):
    destination: Optional[PausedName] = None


class DeliveriesQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    source: Optional[SourceName] = None
    state: Optional[Literal[DELIVERY_STATES]] = None
    event_id: Optional[Key] = None
    event_type: Optional[TypeGlob] = None
    destination: Optional[Annotated[str, StringConstraints(pattern=NAME_PATTERN)]] = None
    limit: QueryInt(1, 500) = 50
    cursor: Optional[Cursor] = None


# --- answers --------------------------------------------------------------------------------
