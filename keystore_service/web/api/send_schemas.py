"""POST /v1/send's body (issue 28) as pydantic models: validated here, and /openapi.json is
generated from them. The rules the schema cannot say (a path's segments, a header the
connection sets, a body over 64 KiB) are gateway/sending.py's, which answers 400 (413) with
nothing written."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field, model_validator

from keystore_service.gateway.connections import (
    MAX_PATH,
    MAX_POINTER,
    PATH_PATTERN,
    POINTER_PATTERN,
)
from keystore_service.web.api.field_types import Fingerprint, Int, Key, Scope
from keystore_service.web.api.schemas import _NOT_BOTH, RecordOut, ResultOut, _Body, _Out

# json and body_base64: one of them, or neither (an empty body).
_ONE_BODY = {"not": {"required": ["json", "body_base64"]}}


class SendHttpRequest(_Body):
    model_config = {**_Body.model_config, "json_schema_extra": _ONE_BODY}

    method: Literal["POST", "PUT", "PATCH", "DELETE"]
    path: str = Field(max_length=MAX_PATH, pattern=PATH_PATTERN, description=(
        "Relative to the connection's base URL, beginning with /; no //, no . or .. "
        "segments (plain or percent-encoded), no encoded / or \\, no control characters."))
    headers: dict[str, str] = Field(default_factory=dict, description=(
        "Sent with the request; the connection's own headers and its idempotency header "
        "win. Not Host, Content-Length, Transfer-Encoding, Connection nor the "
        "connection's idempotency header; no CR or LF."))
    json_body: Any = Field(None, alias="json", description="A JSON body (sent as given).")
    body_base64: Optional[str] = Field(None, max_length=90_000, description=(
        "A body of any bytes, base64 (at most 64 KiB decoded)."))

    @model_validator(mode="after")
    def _one_body(self):
        if {"json_body", "body_base64"} <= self.model_fields_set:
            raise ValueError("give json or body_base64, not both")
        return self


class SendRequest(_Body):
    model_config = {**_Body.model_config, "json_schema_extra": _NOT_BOTH}

    scope: Scope
    key: Key
    connection: str = Field(min_length=1, max_length=64, description=(
        "The name of one of the tenant's connections."))
    payload: Any = Field(None, description=(
        "Hashed as a claim's payload (RFC 8785, SHA-256); without payload (or null) or "
        "fingerprint "
        "the request itself (method, path, body) is the fingerprint."))
    fingerprint: Optional[Fingerprint] = None
    request: SendHttpRequest
    resource_id_pointer: Optional[str] = Field(None, max_length=MAX_POINTER,
                                               pattern=POINTER_PATTERN, description=(
        "A JSON pointer (RFC 6901) into the API's answer: the resource id, e.g. /id."))
    wait_seconds: Int(0, 30) = Field(10, description=(
        "How long to wait for the send to settle before answering 202 accepted."))

    @model_validator(mode="after")
    def _one_fingerprint_source(self):
        if self.payload is not None and self.fingerprint is not None:
            raise ValueError("send either payload or fingerprint, not both")
        return self


class SendResponse(_Out):
    outcome: Literal["sent", "failed", "accepted", "replay"] = Field(description=(
        "sent (201): the API answered 2xx; failed (200): it refused for good; accepted "
        "(202): not settled within wait_seconds; replay (200): a repeat, the first answer"))
    result: Optional[ResultOut] = Field(None, description=(
        "The API's answer: status_code, resource_id (by resource_id_pointer), body (its "
        "JSON, or up to 4 KiB of text); absent while accepted."))
    record: RecordOut


MODELS = [SendHttpRequest, SendRequest, SendResponse]
