"""Forwarding accepted events, one attempt at a time: take due events under a lease, POST
each to its destination, and settle the attempt in one transaction (the event's state, its
attempt, its record, a review when it is given up, the source's pause and last error) only
while the attempt still holds its lease. The relay (relay.py) runs this in threads."""
from __future__ import annotations

import json
import logging
import random as _random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

import requests

from keystore_service.domain import records as domain
from keystore_service.domain.records import SECOND, Micros, State
from keystore_service.hooks import destinations, rules
from keystore_service.hooks.providers import standard
from keystore_service.hooks.rules import Outcome
from keystore_service.service.sealing import Sealer
from keystore_service.storage.events import Event, HookStore
from keystore_service.storage.records import RecordStore
from keystore_service.storage.reviews import ReviewStore
from keystore_service.storage.sources import Source, SourceStore

log = logging.getLogger("keystore.relay")


@dataclass(frozen=True, slots=True)
class Job:
    event: Event
    source: Source
    tenant: str


@dataclass(frozen=True, slots=True)
class Result:
    status: Optional[int]  # None: no answer (no connection, a timeout, a refused address)
    error: Optional[str]  # a short reason when there was no answer
    answer: str  # up to 4 KiB of the answer
    retry_after: Optional[str]
    duration_ms: int
    marked: bool = True  # the answer carried the destination's delivered_header (if any)


class Forwarding:
    def __init__(self, sources: SourceStore, events: HookStore, records: RecordStore,
                 reviews: ReviewStore, sealer: Sealer, clock: Callable[[], Micros],
                 tenant_name: Callable[[int], str], allow_link_local: bool = False,
                 random: Callable[[], float] = _random.random,
                 observed: Any = None):
        self.sources, self.events, self.records, self.reviews = sources, events, records, \
            reviews
        self.sealer, self.clock, self.tenant_name = sealer, clock, tenant_name
        self.allow_link_local, self.random, self.observed = allow_link_local, random, observed

    def take(self, holder: str, limit: int) -> list[Job]:
        """Up to `limit` due events, each now leased to `holder`."""
        now = self.clock()
        with self.events.transaction() as cur:
            taken = self.events.take_due(cur, holder, now, limit)
            sources = {sid: self.sources.by_id(sid, cur) for sid in {e.source_id for e in taken}}
        return [Job(e, sources[e.source_id], self.tenant_name(e.tenant_id)) for e in taken]

    def forward(self, job: Job, session: requests.Session) -> Result:
        """One POST of the event to its destination: original body bytes and Content-Type,
        the provider's headers, the destination's, the gateway's; no redirects followed."""
        source, event = job.source, job.event
        started = time.monotonic()
        try:
            destinations.check_address(source.destination_url, self.allow_link_local)
        except destinations.Refused as exc:
            return Result(None, str(exc), "", None, 0)
        if event.body is None:
            return Result(None, "the body is no longer kept", "", None, 0)
        sealed = self.sealer.open(source.sealed)
        secret = sealed.get("destination_secret")
        signature = standard.sign(secret, event.event_id, self.clock() // SECOND,
                                  event.body) if secret else None
        headers = rules.forward_headers(json.loads(event.headers), sealed.get("headers") or {},
                                        event.event_id, event.attempts, signature)
        try:
            with session.post(source.destination_url, data=event.body, headers=headers,
                              timeout=(min(5, source.timeout_seconds), source.timeout_seconds),
                              allow_redirects=False, stream=True) as resp:
                raw = resp.raw.read(rules.ANSWER_KEPT_BYTES, decode_content=True) or b""
                mark = source.options.get("forward", {}).get("delivered_header")
                return Result(resp.status_code, None, rules.answer_text(raw),
                              resp.headers.get("Retry-After"), _ms(started),
                              marked=mark is None or mark in resp.headers)
        except requests.Timeout:
            return Result(None, "timeout", "", None, _ms(started))
        except requests.ConnectionError:
            return Result(None, "no connection", "", None, _ms(started))
        except (requests.RequestException, ValueError, OSError) as exc:
            return Result(None, type(exc).__name__, "", None, _ms(started))

    def settle(self, job: Job, holder: str, result: Result) -> Optional[Outcome]:
        """Write the attempt's end; None when its lease was taken over meanwhile."""
        now = self.clock()
        source, event = job.source, job.event
        forward = source.options.get("forward", {})
        outcome = rules.classify(result.status, forward.get("retry_statuses", ()),
                                 result.marked) if result.error is None or \
            result.status is not None else (Outcome.FAILED if _final(result.error)
                                            else Outcome.RETRY)
        after = rules.retry_after(result.retry_after, now)
        next_at = None
        if outcome is Outcome.RETRY:
            end = rules.window_end(event.window_start, source.retry_window_seconds)
            next_at = rules.next_attempt(event.attempts, now, after, end, self.random)
            if next_at is None:
                outcome = Outcome.FAILED  # the next try would fall after the window
        state = {Outcome.DELIVERED: "delivered", Outcome.RETRY: "queued",
                 Outcome.FAILED: "failed"}[outcome]
        with self.events.transaction() as cur:
            if not self.events.settle(cur, event, holder, state, now, next_at):
                return None
            self.events.record_attempt(cur, event, now, result.duration_ms, result.status,
                                       result.error, result.answer)
            reason = None if outcome is Outcome.DELIVERED else (
                result.error or f"HTTP {result.status}" + (
                    "" if result.marked else " without the delivered header"))
            self.events.source_error(cur, source.id, reason, now)
            if rules.pauses_source(result.status, after):
                self.events.pause(cur, source.id, after)
            if outcome is not Outcome.RETRY:
                self._settle_record(cur, event, outcome, result, now)
        if self.observed is not None:
            self.observed.forward(job.tenant, source.name, outcome.value,
                                  result.duration_ms / 1000)
        return outcome

    def _settle_record(self, cur, event: Event, outcome: Outcome, result: Result,
                       now: Micros) -> None:
        seen = self.records.by_id(cur, event.record_id)
        if seen is None or seen.state != State.IN_PROGRESS.value:
            return  # a person settled it meanwhile: theirs stands
        delivered = outcome is Outcome.DELIVERED
        state = State.SUCCEEDED.value if delivered else State.FAILED.value
        changes = {"state": state, "lease_expires_at": None, "result_resource_id": None,
                   "result": rules.result_of(result.status, result.answer,
                                             None if delivered else result.error)}
        new = self.records.compare_and_set(seen, changes, cur,
                                           {"ending": state, "ended_at": now})
        if new is not None and not delivered:
            last = self.events.attempts_of(cur, [event.id]).get(event.id, [])[-5:]
            kept = json.dumps({"attempts": [
                {"at": a.at, "status_code": a.status_code, "error": a.error,
                 "answer": (a.answer or "")[:512]} for a in last]})
            self.reviews.open_or_count(cur, new, domain.ReviewKind.DELIVERY_FAILED, now,
                                       kept=kept)


def _final(error: str) -> bool:
    """An error that no retry can mend (a refused destination, a body that is gone)."""
    return error.startswith("the destination") or error.startswith("the body")


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
