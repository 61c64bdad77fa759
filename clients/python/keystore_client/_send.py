"""`KeyStore.send`: the key store makes one request to a connection's API at most once per
(scope, key) (`POST /v1/send`, docs/api.md "Outbound"), and every repeat gets the first
answer back.

The service claims the key exactly as a claim would, queues the request durably and lets its
relay make it with the connection's credentials and idempotency header. What comes back:

    sent      201: the API answered 2xx; `result` has its status, resource id and body
    failed    200: the API refused for good (a 4xx the contract does not retry); `result`
              has that answer, and every repeat gets it back
    accepted  202: not settled within `wait_seconds` (the API is slow or down, or the outcome
              is being settled by asking the API); call `send` again with the same arguments,
              or `lookup(scope, key, wait=...)`
    replay    200: a repeat of a send that settled before; `result` is the stored answer
              (`record.state` says whether that was a success or a refusal)

A repeat while the first send is still running raises InProgress (with `retry_after`); the
same key with another payload raises FingerprintMismatch; a send whose outcome the API could
not confirm raises NeedsReconciliation on its repeats (a person decides).
"""
from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from ._models import Record, Result

MAX_WAIT_SECONDS = 30  # docs/api.md's limit on a send's `wait_seconds`
METHODS = ("POST", "PUT", "PATCH", "DELETE")
OUTCOMES = ("sent", "failed", "accepted", "replay")
_REQUEST_FIELDS = frozenset({"method", "path", "headers", "json", "body_base64"})


@dataclass(frozen=True)
class Sent:
    """The answer to a send: `outcome` (sent | failed | accepted | replay), the `record` of
    (scope, key), and the API's answer as `result` (None while `accepted`)."""

    outcome: str
    record: Record
    result: Optional[Result]

    @property
    def replayed(self) -> bool:
        """A repeat: the result is the first send's (nothing was sent this time)."""
        return self.outcome == "replay"

    @property
    def succeeded(self) -> bool:
        """The API answered 2xx: now (`sent`) or the first time (`replay` of a success)."""
        return self.outcome == "sent" or (self.replayed and self.record.state == "succeeded")

    @property
    def refused(self) -> bool:
        """The API refused for good: now (`failed`) or the first time (`replay`)."""
        return self.outcome == "failed" or (self.replayed and self.record.state == "failed")

    @property
    def pending(self) -> bool:
        """Queued, not settled yet (`accepted`): ask again with the same arguments later."""
        return self.outcome == "accepted"

    @property
    def resource_id(self) -> Optional[str]:
        return self.result.resource_id if self.result else None

    @classmethod
    def from_json(cls, data: dict) -> Sent:
        record = Record.from_json(data["record"])
        result = Result.from_json(data.get("result")) if "result" in data else None
        if result is None and data.get("outcome") != "accepted":
            result = record.result
        return cls(data["outcome"], record, result)


def request_json(request: Optional[Mapping], *, method: Optional[str], path: Optional[str],
                 json: Any, body: Optional[bytes], headers: Optional[Mapping]) -> dict:
    """The wire form of a send's `request`: the dict given, or one made of the keywords (not
    both); ValueError before any request for what the service would refuse anyway."""
    keywords = {"method": method, "path": path, "json": json, "body": body, "headers": headers}
    if request is not None:
        given = [name for name, value in keywords.items() if value is not None]
        if given:
            raise ValueError(f"give the request as a dict or as keywords, not both "
                             f"({', '.join(given)} beside request=)")
        if not isinstance(request, Mapping):
            raise TypeError("request is a dict: method, path, headers, json | body_base64")
        unknown = set(request) - _REQUEST_FIELDS
        if unknown:
            raise ValueError(f"unknown request field(s): {', '.join(sorted(unknown))}")
        wire = dict(request)
    else:
        if json is not None and body is not None:
            raise ValueError("a request has a json body or raw bytes (body=), not both")
        wire = {"method": method or "POST", "path": path, "headers": headers, "json": json,
                "body_base64": None if body is None else _base64(body)}
        wire = {k: v for k, v in wire.items() if v is not None}
    if "json" in wire and "body_base64" in wire:
        raise ValueError("a request has json or body_base64, not both")
    if str(wire.get("method", "")).upper() not in METHODS:
        raise ValueError(f"a send's method is one of {', '.join(METHODS)}")
    wire["method"] = wire["method"].upper()
    if not isinstance(wire.get("path"), str) or not wire["path"].startswith("/"):
        raise ValueError("a send's path is relative to the connection's base URL and begins "
                         "with /")
    if "headers" in wire:
        wire["headers"] = dict(wire["headers"])
    return wire


def _base64(body: bytes) -> str:
    if not isinstance(body, (bytes, bytearray)):
        raise TypeError("body is bytes (for a JSON body, use json=)")
    return base64.b64encode(bytes(body)).decode("ascii")


def send_wait(value: Any) -> int:
    """A send's `wait_seconds`: whole seconds 0-30 (rounded up); ValueError outside."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise TypeError("wait_seconds is a number of seconds")
    if not 0 <= value <= MAX_WAIT_SECONDS:
        raise ValueError(f"wait_seconds is 0-{MAX_WAIT_SECONDS} (the service's limit for one "
                         f"send), not {value}")
    return math.ceil(value)
