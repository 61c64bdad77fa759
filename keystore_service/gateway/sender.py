"""The sender (issue 28): beside each relay, a thread that takes due sends (storage/sends.py:
fair across connections, within each one's max_in_flight and rate) and makes each request
with a small pool of threads, through the one outbound client, with the connection's
headers and its idempotency header (`<scope>:<key>`, encoded as the gateway's ids). Each
answer is classified by the contract's table (domain.sends.classify) and settled in one
transaction while the send's lease holds:

    succeeded (2xx)      record succeeded: {status_code, resource_id, body (4 KiB)}
    failed (a 4xx)       record failed with that answer; never retried
    retry                queued again, same key, backoff as forwards (Retry-After honoured)
    unknown              with an idempotency header: as retry. Else with a check: the check
                         runs now (found: succeeded; absent: queued again at once, same key;
                         unclear: again after a backoff, after CHECK_TRIES a person decides).
                         Else: needs_reconciliation with a send_unknown review, at once
    the window ended     needs_reconciliation (+ review) if any attempt was unknown, else
                         failed with the last answer

A send whose sender stopped mid-request (its lease ran out) is taken over as an unknown
outcome: that request may have reached the API. The sealed request is dropped as the send
settles. Credentials are never logged: log lines name the send, never its headers."""
from __future__ import annotations

import base64
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Optional

from keystore_service.domain import canonical, pointers
from keystore_service.domain.records import SECOND, Micros, Record, ReviewKind, State
from keystore_service.domain.sends import CHECK_TRIES, Class, SendState, Verdict, classify
from keystore_service.gateway import rules
from keystore_service.gateway.connections import ConnectionBroken, Connections
from keystore_service.gateway.outbound import Outbound, Reply
from keystore_service.gateway.settlement import (
    HEADERS_SHUT,
    CheckRun,
    Checker,
    Settlement,
    joined,
)
from keystore_service.service.sealing import Sealer
from keystore_service.storage.connections import Connection
from keystore_service.storage.records import RecordStore
from keystore_service.storage.reviews import ReviewStore
from keystore_service.storage.sends import LEASE_MARGIN_SECONDS, Send, SendStore, Taken

log = logging.getLogger("keystore.sender")
READ = 64 * 1024  # bytes of an answer read (for the resource id pointer)
RESULT_BODY = 4096  # of it kept in the record's result
MAX_RETRY_AFTER_SECONDS = 3600  # a Retry-After is honoured up to this
CHECK_BACKOFF_SECONDS = (2, 10, 60)  # between a check's unclear tries (tests shorten it)
TAKEN_OVER = "the sender stopped mid-request (its lease ran out): the API may have acted"


def answer_body(raw: bytes) -> Any:
    """The answer as the result keeps it: its JSON when it is JSON within 4 KiB, else up
    to 4 KiB of it as text."""
    if len(raw) <= RESULT_BODY:
        try:
            doc = json.loads(raw.decode("utf-8"))
            canonical.canonical(doc)
            return doc
        except (ValueError, RecursionError):
            pass
    return rules.answer_text(raw)


def resource_id(raw: bytes, pointer: Optional[str]) -> Optional[str]:
    if not pointer:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    there, value = pointers.resolve(doc, pointer)
    return pointers.scalar_text(value) if there else None


def result_text(status: Optional[int], raw: bytes, pointer: Optional[str],
                error: Optional[str] = None) -> tuple[str, Optional[str]]:
    """The record's result (canonical JSON) and its resource id."""
    rid = resource_id(raw, pointer)
    result: dict = {"status_code": status, "resource_id": rid, "body": answer_body(raw)}
    if error is not None:
        result["error"] = error
    return canonical.canonical(result).decode("utf-8"), rid


class Sender:
    """One send's work: its request, its classification, its settle (and its check)."""

    def __init__(self, sends: SendStore, connections: Connections, records: RecordStore,
                 reviews: ReviewStore, sealer: Sealer, outbound: Outbound,
                 settlement: Settlement, clock: Callable[[], Micros],
                 observed: Any = None, tenant_name: Callable[[int], str] = str,
                 rand: Callable[[], float] = random.random):
        self.sends, self.connections, self.records = sends, connections, records
        self.reviews, self.sealer, self.outbound = reviews, sealer, outbound
        self.checker = Checker(outbound, connections)
        self.settlement, self.clock, self.observed = settlement, clock, observed
        self.tenant_name, self.rand = tenant_name, rand

    def take(self, holder: str, n: int) -> list[Taken]:
        return self.sends.take_due(holder, self.clock(), n)

    def run(self, taken: Taken) -> Optional[str]:
        """Make the send's request (or its check) and settle it; what it came to, or None
        when its lease was lost meanwhile (another sender has it)."""
        send = taken.send
        connection = taken.connection  # as the take read it (storage/sends.py)
        if connection is None or connection.tenant_id != send.tenant_id:
            connection = self.connections.store.by_id(send.connection_id,
                                                      tenant_id=send.tenant_id)
        record = taken.record  # as the take read it (storage/sends.py)
        if record is None:
            record = self._record(send)
        if connection is None or record is None or record.incarnation != send.incarnation \
                or record.state not in (State.IN_PROGRESS.value,
                                        State.NEEDS_RECONCILIATION.value):
            return self._dropped(send, record)
        if taken.was == SendState.CHECKING.value:
            return self._check(send, connection, record)
        if taken.was == SendState.SENDING.value:  # the last request's outcome is unknown
            return self._unknown(send, connection, record, None, 0, TAKEN_OVER)
        if self.clock() >= send.window_end:
            return self._window_ended(send, record, send.last_error)
        return self._request(send, connection, record)

    def _record(self, send: Send) -> Optional[Record]:
        with self.records.db.connection() as cur:
            return self.records.by_id(cur, send.record_id)

    def _request(self, send: Send, connection: Connection, record: Record) -> Optional[str]:
        try:
            opened = self.sealer.open(send.sealed) if send.sealed else None
        except ValueError:
            opened = None
        if opened is None:  # sealed with a key since removed: it cannot be made
            reply = Reply(None, {}, b"", "the sealed request cannot be opened", sent=False)
            return self._settle(send, connection, record, reply, 0)
        try:
            headers = {**opened["headers"], **self.connections.headers(connection)}
        except ConnectionBroken:  # no key opens them: nothing is sent, so it is retried with
            # its key (never unknown) and fails at the window's end if the key never returns
            reply = Reply(None, {}, b"", HEADERS_SHUT, sent=False)
            return self._settle(send, connection, record, reply, 0)
        if connection.idempotency_header:
            headers[connection.idempotency_header] = rules.header_id(send.reference)
        started = time.monotonic()
        reply = self.outbound.request(send.method, joined(connection.base_url, send.path),
                                      base64.b64decode(opened["body"]), headers,
                                      connection.timeout_seconds, READ)
        return self._settle(send, connection, record, reply,
                            int((time.monotonic() - started) * 1000))

    def _settle(self, send: Send, connection: Connection, record: Record, reply: Reply,
                duration_ms: int) -> Optional[str]:
        klass = classify(reply.status, reply.sent)
        now = self.clock()
        if klass is Class.UNKNOWN:
            return self._unknown(send, connection, record, reply, duration_ms)
        if klass is Class.RETRY:
            after = rules.retry_after(reply.headers.get("Retry-After") if reply.headers
                                      else None, now, MAX_RETRY_AFTER_SECONDS)
            at = rules.next_attempt(send.attempts + 1, now, after, send.window_end, self.rand)
            if at is None:
                return self._window_ended(send, record, _said(reply), reply, duration_ms)
            return self._again(send, reply, duration_ms, klass, at, "retry")
        state = State.SUCCEEDED if klass is Class.SUCCEEDED else State.FAILED
        result, rid = result_text(reply.status, reply.body, send.resource_id_pointer)
        with self.sends.transaction() as cur:
            if not self._attempt(cur, send, reply, duration_ms, klass, now):
                return None
            self._end_record(cur, record, state.value, result, rid, now)
            self._close(cur, send, SendState(state.value), now, _said(reply))
        return self._count(send, state.value)

    def _attempt(self, cur: Any, send: Send, reply: Optional[Reply], duration_ms: int,
                 klass: Class, now: Micros, error: Optional[str] = None) -> bool:
        """The attempt's row, if the send still holds its lease (checked by a no-op settle
        first: a taken-over send writes nothing)."""
        if self.sends.settle(cur, send, {"attempts": send.attempts + (reply is not None or
                                                                      error is not None)}) \
                is None:
            return False
        status = reply.status if reply else None
        answer = rules.answer_text(reply.body) if reply and reply.body else None
        self.sends.add_attempt(cur, send.id, now - duration_ms * 1000, duration_ms, status,
                               (reply.error if reply else None) or error, klass.value, answer)
        return True

    def _again(self, send: Send, reply: Optional[Reply], duration_ms: int, klass: Class,
               at: Micros, outcome: str, unknown: bool = False,
               error: Optional[str] = None) -> Optional[str]:
        now = self.clock()
        with self.sends.transaction() as cur:
            if not self._attempt(cur, send, reply, duration_ms, klass, now, error):
                return None
            self.sends.settle(cur, _bumped(send, reply, error), {
                "state": SendState.QUEUED.value, "next_attempt_at": at, "lease_holder": None,
                "lease_until": None, "unknown": 1 if unknown or send.unknown else 0,
                "last_error": _said(reply) if reply else error})
        return self._count(send, outcome)

    def _unknown(self, send: Send, connection: Connection, record: Record,
                 reply: Optional[Reply], duration_ms: int,
                 error: Optional[str] = None) -> Optional[str]:
        """An attempt whose outcome is unknown, by the contract's table."""
        now = self.clock()
        if connection.idempotency_header:  # the API dedupes: the same key again
            at = rules.next_attempt(send.attempts + 1, now, None, send.window_end, self.rand)
            if at is not None:
                return self._again(send, reply, duration_ms, Class.UNKNOWN, at, "retry",
                                   unknown=True, error=error)
            return self._window_ended(_marked(send), record, _said(reply) if reply else error,
                                      reply, duration_ms, error)
        if connection.check:
            with self.sends.transaction() as cur:
                if not self._attempt(cur, send, reply, duration_ms, Class.UNKNOWN, now, error):
                    return None
                checking = self.sends.settle(cur, _bumped(send, reply, error), {
                    "state": SendState.CHECKING.value, "unknown": 1,
                    "lease_until": now + (connection.timeout_seconds + LEASE_MARGIN_SECONDS)
                    * SECOND, "last_error": _said(reply) if reply else error})
            return None if checking is None else self._check(checking, connection, record)
        with self.sends.transaction() as cur:
            if not self._attempt(cur, send, reply, duration_ms, Class.UNKNOWN, now, error):
                return None
            self._unresolved(cur, _bumped(send, reply, error), record, now,
                             _said(reply) if reply else error)
        return self._count(send, SendState.UNRESOLVED.value)

    def _check(self, send: Send, connection: Connection, record: Record) -> Optional[str]:
        """Ask the API whether the unknown request took effect, and settle by its verdict."""
        if not connection.check:  # removed meanwhile: a person decides, as without one
            with self.sends.transaction() as cur:
                if not self._unresolved(cur, send, record, self.clock(), send.last_error):
                    return None
            return self._count(send, SendState.UNRESOLVED.value)
        run = self.checker.run(connection, connection.check, record.scope, record.key)
        now = self.clock()
        with self.sends.transaction() as cur:
            self.settlement.record_check(cur, record, run, now)
            if run.verdict is Verdict.FOUND:
                return self._found(cur, send, record, run, now)
            if run.verdict is Verdict.ABSENT:  # nothing happened: the same key again, now
                done = self.sends.settle(cur, send, {
                    "state": SendState.QUEUED.value, "next_attempt_at": now, "unknown": 0,
                    "lease_holder": None, "lease_until": None, "check_tries": 0})
                return None if done is None else self._count(send, "absent")
            tries = send.check_tries + 1
            if tries >= CHECK_TRIES:
                if not self._unresolved(cur, send, record, now, run.error, checks=True,
                                        check_tries=tries):
                    return None
                return self._count(send, SendState.UNRESOLVED.value)
            pause = CHECK_BACKOFF_SECONDS[min(tries, len(CHECK_BACKOFF_SECONDS)) - 1]
            done = self.sends.settle(cur, send, {
                "check_tries": tries, "lease_holder": None, "lease_until": now,
                "next_attempt_at": now + int(pause * SECOND), "last_error": run.error})
            return None if done is None else self._count(send, "unclear")

    def _found(self, cur: Any, send: Send, record: Record, run: CheckRun,
               now: Micros) -> Optional[str]:
        closed = self._close(cur, send, SendState.SUCCEEDED, now,
                             f"found by the check: status {run.status}",
                             check_tries=send.check_tries + 1)
        if not closed:
            return None
        self.settlement.settle_found(cur, record, run, now)
        return self._count(send, "found")

    def _unresolved(self, cur: Any, send: Send, record: Record, now: Micros,
                    error: Optional[str], checks: bool = False, **extra: Any) -> bool:
        """The record needs_reconciliation with a send_unknown review (the checks' answers
        attached when checks ran); the send unresolved: a person decides."""
        if not self._close(cur, send, SendState.UNRESOLVED, now, error, unknown=1, **extra):
            return False
        seen = self.records.by_id(cur, record.id)
        if seen is None or seen.incarnation != record.incarnation:
            return True
        new = seen
        if seen.state == State.IN_PROGRESS.value:
            new = self.records.compare_and_set(seen, {
                "state": State.NEEDS_RECONCILIATION.value, "lease_expires_at": None},
                cur) or seen
        review = self.reviews.open_or_count(cur, new, ReviewKind.SEND_UNKNOWN.value, now,
                                            count=0)
        if checks:
            self.settlement.keep_answers(cur, new, review.id)
        return True

    def _window_ended(self, send: Send, record: Record, error: Optional[str],
                      reply: Optional[Reply] = None, duration_ms: int = 0,
                      attempt_error: Optional[str] = None) -> Optional[str]:
        now = self.clock()
        with self.sends.transaction() as cur:
            if reply is not None or attempt_error is not None:
                klass = classify(reply.status, reply.sent) if reply else Class.UNKNOWN
                if not self._attempt(cur, send, reply, duration_ms, klass, now, attempt_error):
                    return None
                send = _bumped(send, reply, attempt_error)
            if send.unknown:
                if not self._unresolved(cur, send, record, now, error):
                    return None
                return self._count(send, SendState.UNRESOLVED.value)
            status, raw = (reply.status, reply.body) if reply else \
                self.sends.last_answer(cur, send.id)
            result, _ = result_text(status, raw, None, error or "the retry window ended")
            if not self._close(cur, send, SendState.FAILED, now, error):
                return None
            self._end_record(cur, record, State.FAILED.value, result, None, now)
        return self._count(send, SendState.FAILED.value)

    def _dropped(self, send: Send, record: Optional[Record]) -> Optional[str]:
        """Its record was settled otherwise meanwhile (a person, a new incarnation): the
        send ends without a request."""
        state = SendState.SUCCEEDED if record is not None and record.incarnation == \
            send.incarnation and record.state == State.SUCCEEDED.value else SendState.FAILED
        with self.sends.transaction() as cur:
            if not self._close(cur, send, state, self.clock(), "settled otherwise"):
                return None
        return self._count(send, state.value)

    def _end_record(self, cur: Any, record: Record, state: str, result: str,
                    rid: Optional[str], now: Micros) -> None:
        seen = self.records.by_id(cur, record.id)
        if seen is None or seen.incarnation != record.incarnation or seen.state not in (
                State.IN_PROGRESS.value, State.NEEDS_RECONCILIATION.value):
            return
        self.records.compare_and_set(seen, {"state": state, "result": result,
                                            "result_resource_id": rid,
                                            "lease_expires_at": None}, cur,
                                     {"ending": state, "ended_at": now}
                                     if seen.state == State.IN_PROGRESS.value else None)

    def _close(self, cur: Any, send: Send, state: SendState, now: Micros,
               error: Optional[str], **extra: Any) -> bool:
        """The send settled: its sealed request dropped, its lease given up."""
        return self.sends.settle(cur, send, {
            "state": state.value, "sealed": None, "settled_at": now, "lease_holder": None,
            "lease_until": None, "last_error": error, **extra}) is not None

    def _count(self, send: Send, outcome: str) -> str:
        if self.observed is not None and hasattr(self.observed, "send"):
            self.observed.send(self.tenant_name(send.tenant_id), send.connection_name, outcome)
        return outcome


def _said(reply: Optional[Reply]) -> Optional[str]:
    if reply is None:
        return None
    return reply.error if reply.status is None else f"status {reply.status}"


def _with(send: Send, **changes: Any) -> Send:
    return replace(send, **changes)


def _bumped(send: Send, reply: Optional[Reply], error: Optional[str]) -> Send:
    """The send as _attempt left it (one more attempt counted, when there was one)."""
    return _with(send, attempts=send.attempts + (reply is not None or error is not None))


def _marked(send: Send) -> Send:
    return _with(send, unknown=1)
