"""/openapi.json's entry for POST /v1/send (openapi.py adds it), from send_schemas.py."""
from __future__ import annotations

from collections.abc import Callable

from keystore_service.web.api import schemas
from keystore_service.web.api import send_schemas as ss

_EXPIRES = {"Idempotency-Expires": {"description": "when the record's window ends",
                                    "schema": {"type": "string"}}}


def paths(json_: Callable, errors_: Callable, body_of: Callable) -> dict:
    answer = lambda d, h=None: json_(ss.SendResponse, d, {**_EXPIRES, **(h or {})})
    retry = {"Retry-After": {"description": "seconds until the send's next request is due",
                             "schema": {"type": "string"}}}
    return {"/v1/send": {"post": {
        "summary": "Make a request to a connection's API once per (scope, key): the key is "
                   "claimed as a claim would, the request queued and made by the relay with "
                   "the connection's credentials and idempotency header",
        "operationId": "send",
        "requestBody": body_of(ss.SendRequest),
        "responses": {
            "201": answer("sent: the API answered 2xx (result: status, resource id, body)"),
            "200": answer("failed: the API refused for good; or replay of a settled send",
                          {"Idempotent-Replayed": {"description": "true on a replay",
                                                   "schema": {"type": "string"}}}),
            "202": answer("accepted: not settled within wait_seconds (ask again with the "
                          "same body, or GET /v1/keys)"),
            "404": json_(schemas.ErrorResponse, "no such connection"),
            "409": json_(schemas.ErrorResponse, "in_progress (with Retry-After) or "
                         "needs_reconciliation (the API could not confirm the first send)",
                         retry),
            "422": json_(schemas.ErrorResponse, "fingerprint_mismatch: another payload"),
            **errors_("400", "401", "403", "413", "429", "503")}}}}
