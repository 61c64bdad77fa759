"""The connections' and scopes' settlements' wire models (issue 28), validated like
schemas.py (strict types, unknown fields refused); /openapi.json is generated from them, so
what they check is what it says. The patterns are gateway/connections.py's, which checks
the same again for any caller; what no schema can know (a taken name, where a base URL's
name resolves, a header given twice in two cases or named as the idempotency header, a
connection the tenant does not have) is said in the field's description."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (
    AfterValidator,
    Field,
    JsonValue,
    RootModel,
    StringConstraints,
    model_validator,
)

from keystore_service.domain.names import NAME_PATTERN
from keystore_service.domain.sends import OnAbsent
from keystore_service.gateway import connections as rules
from keystore_service.web.api.schemas import Int, _Body, _Out

DAY = 86_400


def _by(problem: Any) -> AfterValidator:
    """A validator from one of gateway/connections' rules (None: no problem)."""
    def check(value: str) -> str:
        found = problem(value)
        if found:
            raise ValueError(found)
        return value
    return AfterValidator(check)


ConnectionName = Annotated[str, StringConstraints(pattern=NAME_PATTERN), Field(
    description="1-64 of a-z 0-9 _ -, unique per tenant: a name the tenant has already is "
                "refused with 400")]
# The request's framing is the gateway's, in any case (a pattern cannot ignore case).
FRAMING_PATTERN = "^(?:" + "|".join(sorted(
    "".join(f"[{c.upper()}{c}]" if c.isalpha() else c for c in name)
    for name in rules.FRAMING)) + ")$"
HeaderName = Annotated[str, StringConstraints(pattern=rules.HEADER_NAME_PATTERN)]
HeaderValue = Annotated[str, StringConstraints(max_length=rules.MAX_HEADER_VALUE,
                                               pattern=rules.HEADER_VALUE_PATTERN)]
IdempotencyHeader = Annotated[str, StringConstraints(pattern=rules.HEADER_NAME_PATTERN), Field(
    json_schema_extra={"not": {"pattern": FRAMING_PATTERN}},
    description="The header this API dedupes on (e.g. Idempotency-Key); each send's value is "
                "<scope>:<key>. Null: it has none, and an unknown outcome goes to the check")]
Pointer = Annotated[str, StringConstraints(max_length=rules.MAX_POINTER,
                                           pattern=rules.POINTER_PATTERN),
                    _by(rules.pointer_problem), Field(
    description='A JSON Pointer (RFC 6901) into the answer: "" or /a/0/b, ~0 for ~, ~1 for /')]
CheckPath = Annotated[str, StringConstraints(min_length=1, max_length=rules.MAX_PATH,
                                             pattern=rules.CHECK_PATH_PATTERN),
                      _by(rules.check_path_problem), Field(
    json_schema_extra={"not": {"pattern": rules.PATH_REFUSED}},
    description="Appended to the base URL's path, as a send's is: it begins with /, no // or "
                ". or .. segment (nor %2e, %2f, %5c spellings) before its query; {key}, "
                "{scope} and {reference} (= <scope>:<key>) are filled, each percent-encoded")]


def _headers_schema(schema: dict) -> None:
    """The headers' JSON schema: every name a token and not the request's framing."""
    value = schema.pop("patternProperties")[rules.HEADER_NAME_PATTERN]
    schema["propertyNames"] = {"pattern": rules.HEADER_NAME_PATTERN,
                               "not": {"pattern": FRAMING_PATTERN}}
    schema["additionalProperties"] = value
    schema["description"] = (
        "Sent with every request of the connection (e.g. Authorization). Write-only: sealed, "
        "never returned or logged; answers list the names. Host, Content-Length, "
        "Transfer-Encoding and Connection are refused in any case, and so (400) are a name "
        "given twice in two cases and the idempotency_header")


Headers = Annotated[dict[HeaderName, HeaderValue],
                    Field(max_length=rules.MAX_HEADERS, json_schema_extra=_headers_schema)]


class PerSecond(_Body):
    per_second: Int(1, 10_000)


class PerMinute(_Body):
    per_minute: Int(1, 10_000)


class Rate(RootModel[Union[PerSecond, PerMinute]]):
    """{"per_second": n} or {"per_minute": n}, 1 to 10,000: requests started, held across
    relays, beside max_in_flight."""

    def plain(self) -> dict:
        return self.root.model_dump()


class Found(_Body):
    pointer: Pointer
    equals: Optional[JsonValue] = Field(None, description=(
        "given: the resource exists when the pointer's value equals this (JSON equality)"))


# Exactly one way of telling absence; the other is absent or null.
_ONE_ABSENCE = [{"required": ["absent_status"], "properties": {
                    "absent_status": {"type": "array"}, "absent": {"type": "null"}}},
                {"required": ["absent"], "properties": {
                    "absent": {"type": "string"}, "absent_status": {"type": "null"}}}]


class Check(_Body):
    """What the service asks the API when an outcome is unknown: found when `found.pointer`
    exists in a 2xx JSON answer (equal to `found.equals` when given); absent when the
    status is in `absent_status`, or the `absent` pointer names an empty list."""

    model_config = {**_Body.model_config, "json_schema_extra": {"oneOf": _ONE_ABSENCE}}
    method: Literal["GET"] = "GET"
    path: CheckPath
    found: Found
    resource_id: Optional[Pointer] = None
    absent_status: Optional[Annotated[list[Int(400, 499)], Field(
        min_length=1, max_length=10)]] = None
    absent: Optional[Pointer] = None

    @model_validator(mode="after")
    def _one_absence(self) -> Check:
        if (self.absent_status is None) == (self.absent is None):
            raise ValueError("give exactly one of absent_status and absent")
        return self

    def plain(self) -> dict:
        out: dict[str, Any] = {"method": self.method, "path": self.path,
                               "found": {"pointer": self.found.pointer}}
        if "equals" in self.found.model_fields_set:
            out["found"]["equals"] = self.found.equals
        for name in ("resource_id", "absent_status", "absent"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


BASE_URL = ("http:// or https:// with a host and no credentials, at most 2048 characters; "
            "a send's path is appended to its path. Refused with 400 when the address rules "
            "refuse it (docs/webhooks/README.md): where a name leads is known only by "
            "resolving it, which no schema can do")
BaseUrl = Annotated[str, StringConstraints(min_length=1, max_length=2048), Field(
    description=BASE_URL)]
Timeout = Int(1, 60)
Window = Annotated[Int(10, 30 * DAY), Field(description=(
    "How long a send is retried with the same key (10 s to 30 days; default a day)"))]
InFlight = Int(1, 256)


class ConnectionCreate(_Body):
    name: ConnectionName
    base_url: BaseUrl
    headers: Headers = Field(default_factory=dict)
    idempotency_header: Optional[IdempotencyHeader] = None
    timeout_seconds: Timeout = 10
    retry_window_seconds: Window = DAY
    max_in_flight: InFlight = 4
    rate: Optional[Rate] = None
    check: Optional[Check] = None


class ConnectionChange(_Body):
    """PATCH: what is given changes; `headers` replace them all. Null clears the
    idempotency_header, rate and check, and leaves any other field as it is."""

    base_url: Optional[BaseUrl] = None
    headers: Optional[Headers] = None
    idempotency_header: Optional[IdempotencyHeader] = None
    timeout_seconds: Optional[Timeout] = None
    retry_window_seconds: Optional[Window] = None
    max_in_flight: Optional[InFlight] = None
    rate: Optional[Rate] = None
    check: Optional[Check] = None


class SettlementPut(_Body):
    connection: ConnectionName = Field(description="one of the tenant's connections (400 "
                                                   "when it has none of that name)")
    check: Check
    on_absent: Literal[tuple(o.value for o in OnAbsent)] = Field(description=(
        "release: a claim the check finds absent is released (a client may do it again); "
        "review: it stays for a person, with the check's answer"))


# --- answers --------------------------------------------------------------------------------

class ConnectionOut(_Out):
    name: str
    base_url: str
    headers: list[str] = Field(description="the headers' names (their values are never shown)")
    idempotency_header: Optional[str]
    timeout_seconds: int
    retry_window_seconds: int
    max_in_flight: int
    rate: Optional[dict[str, int]]
    check: Optional[dict[str, Any]]
    created_at: str
    updated_at: str


class ConnectionResponse(_Out):
    connection: ConnectionOut


class ConnectionsResponse(_Out):
    connections: list[ConnectionOut]


class SettlementOut(_Out):
    scope: str
    connection: str
    check: dict[str, Any]
    on_absent: Literal[tuple(o.value for o in OnAbsent)]
    created_at: str
    updated_at: str


class SettlementResponse(_Out):
    settlement: SettlementOut


MODELS = [ConnectionCreate, ConnectionChange, SettlementPut, ConnectionResponse,
          ConnectionsResponse, SettlementResponse]
