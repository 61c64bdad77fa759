"""POST /v1/send (issue 28; the contract's "Outbound" section): the key claimed exactly as
POST /v1/claim claims it, and the first send's request queued durably in the same
transaction, sealed with the gateway's Sealer until it settles; the sender (sender.py) then
makes it. The caller waits up to `wait_seconds` for the record to settle:

    the send settled: the API answered 2xx          201 sent      (result: status, resource
                                                                   id, body up to 4 KiB)
    the API refused for good (a 4xx not retried)     200 failed    (result: that answer)
    not settled within wait_seconds                  202 accepted  (GET /v1/keys, or wait)
    the outcome could not be confirmed               409 needs_reconciliation
    a repeat of a settled send                       200 replay    (Idempotent-Replayed)
    a repeat while the first still runs              409 in_progress (+ Retry-After)
    the same key with another payload                422 fingerprint_mismatch

Nothing is written for a request that breaks a rule (400, 404 for another tenant's or no
connection, 413 for a body over 64 KiB). Without `payload` or `fingerprint`, the request
itself (method, path, body) is the fingerprint: the same key with another request is a
mismatch, never a second send."""
from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from keystore_service import errors
from keystore_service.domain import canonical
from keystore_service.domain import records as domain
from keystore_service.domain.records import SECOND, Action, Micros, Outcome, Record, State
from keystore_service.domain.sends import SendState
from keystore_service.domain.upkeep import claim_changes
from keystore_service.gateway.connections import header_problem, path_problem, pointer_problem
from keystore_service.service.claims import KeyStoreService
from keystore_service.service.fencing import new_lease_token
from keystore_service.service.outcomes import Claimed, answer
from keystore_service.service.phases import AGAIN, Again, Refused, atomic_phase
from keystore_service.service.sealing import Sealer
from keystore_service.storage.connections import Connection, ConnectionStore
from keystore_service.storage.records import new_record_values
from keystore_service.storage.sends import Send, SendStore

METHODS = ("POST", "PUT", "PATCH", "DELETE")
MAX_BODY = 64 * 1024  # a send's body, in bytes
MAX_WAIT_SECONDS = 30
# The record's lease outlasts the send's window by this much (its last request, its checks'
# tries and their backoff): the stale-lease reconciler never takes a send the sender holds.
RECORD_MARGIN_SECONDS = 3600
RETRY_AFTER_MAX = 60  # a repeat is told to come back within a minute at most


@dataclass(frozen=True, slots=True)
class SendRequest:
    """A POST /v1/send body as the API parsed it (web/api/send_schemas.py)."""

    scope: str
    key: str
    connection: str
    method: str
    path: str
    headers: dict = field(default_factory=dict)
    json_body: Any = None
    has_json: bool = False
    body_base64: Optional[str] = None
    payload: Any = None
    has_payload: bool = False
    fingerprint: Optional[str] = None
    resource_id_pointer: Optional[str] = None
    wait_seconds: float = 10


@dataclass(frozen=True, slots=True)
class SendAnswer:
    outcome: str  # sent, failed, accepted, replay
    status: int
    record: Record
    result: Optional[dict]
    replayed: bool = False


def _refuse(field_name: str, message: str) -> errors.InvalidRequest:
    return errors.InvalidRequest(f"{field_name}: {message}", details={"field": field_name})


def request_body(req: SendRequest) -> bytes:
    """The body the API will get: the JSON given (compact, as given), or the bytes of
    body_base64; 400 for both or bad base64, 413 over MAX_BODY."""
    if req.has_json and req.body_base64 is not None:
        raise _refuse("request", "give json or body_base64, not both")
    if req.has_json:
        try:
            body = json.dumps(req.json_body, ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False).encode("utf-8")
        except (ValueError, TypeError, RecursionError):
            raise _refuse("request.json", "not JSON") from None
    elif req.body_base64 is not None:
        try:
            body = base64.b64decode(req.body_base64, validate=True)
        except (binascii.Error, ValueError):
            raise _refuse("request.body_base64", "not base64") from None
    else:
        body = b""
    if len(body) > MAX_BODY:
        raise errors.PayloadTooLarge(f"a send's body is at most {MAX_BODY // 1024} KiB",
                                     details={"field": "request", "limit_bytes": MAX_BODY})
    return body


def validated(req: SendRequest, connection: Connection) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a request that keeps the rules (400 otherwise)."""
    if req.method not in METHODS:
        raise _refuse("request.method", f"one of {', '.join(METHODS)}")
    problem = path_problem(req.path)
    if problem:
        raise _refuse("request.path", problem)
    headers = dict(req.headers or {})
    problem = header_problem(headers, connection.idempotency_header)
    if problem:
        raise _refuse("request.headers", problem)
    if req.resource_id_pointer is not None:
        problem = pointer_problem(req.resource_id_pointer)
        if problem:
            raise _refuse("resource_id_pointer", problem)
    if not 0 <= req.wait_seconds <= MAX_WAIT_SECONDS:
        raise _refuse("wait_seconds", f"0-{MAX_WAIT_SECONDS}")
    body = request_body(req)
    if req.has_json and not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = "application/json"
    return body, headers


def fingerprint_of(req: SendRequest, body: bytes) -> str:
    """The claim's fingerprint: of the payload (canonical, as a claim's), the one given, or
    of the request itself."""
    try:
        if req.has_payload:
            return canonical.fingerprint(req.payload)
    except ValueError as exc:
        raise _refuse("payload", str(exc)) from None
    if req.fingerprint is not None:
        return req.fingerprint
    return canonical.fingerprint({"method": req.method, "path": req.path,
                                  "body": base64.b64encode(body).decode("ascii")})


def result_of(record: Record) -> Optional[dict]:
    return json.loads(record.result) if record.result is not None else None


class Sending:
    def __init__(self, service: KeyStoreService, connections: ConnectionStore,
                 sends: SendStore, sealer: Sealer, clock: Callable[[], Micros],
                 ttl_seconds: int, wake: Callable[[], Any] = lambda: None):
        self.service, self.connections, self.sends = service, connections, sends
        self.records, self.sealer, self.clock = service.records, sealer, clock
        self.ttl_seconds, self.wake = ttl_seconds, wake

    def send(self, tenant_id: int, req: SendRequest,
             wait: Optional[float] = None) -> SendAnswer:
        """By the table above; `wait` (default the request's wait_seconds) is how long this
        call may wait (0 when the caller found no seat to wait in)."""
        if domain.is_hook_scope(req.scope):
            raise errors.Forbidden("scopes beginning with hook: are the webhook gateway's own",
                                   details={"field": "scope"})
        connection = self.connections.get(tenant_id, req.connection)
        if connection is None:
            raise errors.NotFound(f"no connection named {req.connection!r}",
                                  details={"field": "connection"})
        body, headers = validated(req, connection)
        fingerprint = fingerprint_of(req, body)
        sealed = self.sealer.seal({"headers": headers,
                                   "body": base64.b64encode(body).decode("ascii")})
        wait = req.wait_seconds if wait is None else wait
        token, token_hash = new_lease_token()  # one for every retry: our own write is ours
        query = domain.ClaimRequest(fingerprint, token_hash=token_hash)
        try:
            got = self.service.through_outages(lambda: self._claim(
                tenant_id, req, connection, fingerprint, sealed, token_hash, query))
        except errors.InProgress as busy:
            return self._busy(tenant_id, req, busy, wait)
        if got.outcome is Outcome.REPLAY:
            return self._replay(got.record)
        self.wake()
        return self._settled(tenant_id, req, wait)

    def _claim(self, tenant_id: int, req: SendRequest, connection: Connection,
               fingerprint: str, sealed: str, token_hash: str,
               query: domain.ClaimRequest) -> Claimed:
        now = self.clock()
        window_end = now + connection.retry_window_seconds * SECOND
        lease_until = window_end + (connection.timeout_seconds + RECORD_MARGIN_SECONDS) * SECOND
        expires_at = max(now + self.ttl_seconds * SECOND, lease_until)
        values = _record_values(tenant_id, req, fingerprint, token_hash, now,
                                                lease_until, expires_at)

        def queued(cur: Any, record: Record) -> Claimed:
            self.sends.put(cur, {
                "tenant_id": tenant_id, "connection_id": connection.id,
                "connection_name": connection.name, "record_id": record.id,
                "incarnation": record.incarnation, "reference": f"{req.scope}:{req.key}",
                "method": req.method, "path": req.path,
                "resource_id_pointer": req.resource_id_pointer, "sealed": sealed,
                "state": SendState.QUEUED.value, "attempts": 0, "unknown": 0,
                "check_tries": 0, "created_at": now, "window_end": window_end,
                "next_attempt_at": now, "lease_holder": None, "lease_until": None,
                "settled_at": None, "last_error": None})
            return Claimed(Outcome.ACQUIRED, record)

        def step(cur: Any) -> Union[Claimed, Refused, Again]:
            row = self.records.claim(values, cur)  # insert, or count a plain repeat
            if row is not None:
                if row.lease_token_hash == token_hash:
                    return queued(cur, row)
                return answer(domain.decide_claim(row, query, now).outcome, row, now)
            seen = self.records.get(tenant_id, req.scope, req.key, cur)
            if seen is None:
                return AGAIN  # purged in between
            decision = domain.decide_claim(seen, query, now)
            if decision.action is Action.RESUME:  # our own write: its answer was lost
                return Claimed(Outcome.ACQUIRED, seen)
            if decision.action is Action.NOTHING:  # a mismatch counts on its review
                return Refused(self.service.refuse(cur, decision.outcome, seen, fingerprint,
                                                   now))
            changes, ended = claim_changes(decision.action, seen, domain.OnStale.RECONCILE
                                           .value, values, now)
            new = self.records.compare_and_set(seen, changes, cur, ended)
            if new is None:
                return AGAIN
            new = self.service.after_claim(cur, decision, seen, new, now)
            if decision.outcome is Outcome.ACQUIRED:
                return queued(cur, new)
            return answer(decision.outcome, new, now)
        return atomic_phase(self.records.transaction, step)

    def _replay(self, record: Record) -> SendAnswer:
        return SendAnswer("replay", 200, record, result_of(record), replayed=True)

    def _settled(self, tenant_id: int, req: SendRequest, wait: float) -> SendAnswer:
        """The first send's answer once its record settled, or within `wait` seconds."""
        record = self.service.lookup(tenant_id, req.scope, req.key, wait)
        if record.state == State.SUCCEEDED.value:
            return SendAnswer("sent", 201, record, result_of(record))
        if record.state == State.FAILED.value:
            return SendAnswer("failed", 200, record, result_of(record))
        if record.state == State.NEEDS_RECONCILIATION.value:
            raise errors.NeedsReconciliation(
                "the API could not confirm whether the send was done; a person decides",
                record=record, outcome=Outcome.NEEDS_RECONCILIATION.value)
        return SendAnswer("accepted", 202, record, None)

    def _busy(self, tenant_id: int, req: SendRequest, busy: errors.InProgress,
              wait: float) -> SendAnswer:
        """A repeat while the first send runs: with a wait, the first one's end replayed if
        it comes in time; else 409 in_progress, told to come back when its next request is
        due (not when the record's long lease runs out)."""
        record = busy.record
        if wait > 0 and record is not None:
            record = self.service.lookup(tenant_id, req.scope, req.key, wait)
            if record.state in domain.FINISHED:
                return self._replay(record)
            if record.state == State.NEEDS_RECONCILIATION.value:
                raise errors.NeedsReconciliation(record=record,
                                                 outcome=Outcome.NEEDS_RECONCILIATION.value)
        seconds = self._retry_after(tenant_id, record)
        if seconds is not None:
            busy.details["retry_after_seconds"] = seconds
            busy.headers["Retry-After"] = str(seconds)
        if record is not None:
            busy.record = record
        raise busy

    def _retry_after(self, tenant_id: int, record: Optional[Record]) -> Optional[int]:
        if record is None:
            return None
        mine = [s for s in self.sends.by_record(tenant_id, record.id)
                if s.incarnation == record.incarnation]
        if not mine:
            return None  # a plain claim holds the key: its lease says when
        return _retry_seconds(mine[-1], self.clock())


def _retry_seconds(send: Send, now: Micros) -> int:
    if send.state == SendState.QUEUED.value:
        left = max(0, send.next_attempt_at - now)
        return max(1, min(RETRY_AFTER_MAX, -(-left // SECOND)))
    return 1  # being sent or checked now


def _record_values(tenant_id: int, req: SendRequest, fingerprint: str, token_hash: str,
                   now: Micros, lease_until: Micros, expires_at: Micros) -> dict:
    return new_record_values(tenant_id, req.scope, req.key, fingerprint, token_hash, now,
                             lease_until, expires_at, domain.OnStale.RECONCILE.value)
