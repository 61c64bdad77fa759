"""Forwarding accepted events, one attempt at a time: take due events under a lease, POST
each to its destination, and settle the attempt in one transaction (the event's state, its
attempt, its record, a review when it is given up, the source's pause and last error) only
while the attempt still holds its lease. The relay (relay.py) runs this in threads. An event
its destination's filter does not take when its turn comes is `filtered`, one a newer version
of its key was delivered before is `superseded` (gateway/ordering.py): no request made."""
from __future__ import annotations

import json
import logging
import random as _random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from requests.certs import where as ca_bundle

from keystore_service.domain import records as domain
from keystore_service.domain.deliveries import DeliveryState
from keystore_service.domain.records import SECOND, Micros, State
from keystore_service.gateway import ordering, rules
from keystore_service.gateway.destinations import Policy
from keystore_service.gateway.endings import ENDS_WELL, PAUSED_PAST_WINDOW, UNSENT
from keystore_service.gateway.endings import down as _down
from keystore_service.gateway.endings import ending as _ending
from keystore_service.gateway.endings import final as _final
from keystore_service.gateway.endings import reason as _reason
from keystore_service.gateway.endings import window_end
from keystore_service.gateway.outbound import Outbound
from keystore_service.gateway.providers import standard
from keystore_service.gateway.routes import Route, Routes
from keystore_service.gateway.rules import Outcome
from keystore_service.service.sealing import Sealer
from keystore_service.storage import take
from keystore_service.storage.events import Event, Health, HookStore
from keystore_service.storage.pauses import PauseChanged
from keystore_service.storage.records import RecordStore
from keystore_service.storage.reviews import ReviewStore
from keystore_service.storage.sources import Source, SourceStore
from keystore_service.storage.versions import VersionStore

log = logging.getLogger("keystore.relay")
# The error of a forward of a source no configured key opens (its last_error, on the page).
BROKEN = ("the source's secrets cannot be opened: KEYSTORE_SECRET_KEY lacks the key that "
          "sealed them")
# A forward ends this long before its attempt's lease (the destination's timeout + 15 s,
# storage/events.py) at the latest: time to write its end before another relay may take the
# event over, so an event is never forwarded twice at once.
LEASE_END_MARGIN_SECONDS = 5
# Recovery (issue 27): a success after the destination failed this long makes every event of
# the source waiting on a backoff due at once. Shorter runs are one event's refusals among
# successes (a 500 for that event only), not an outage: without the bound, each success
# would make that event due again, and it would be retried as often as the others succeed.
RECOVERY_AFTER_SECONDS = 5


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
    filtered: bool = False  # the destination's filter does not take it: nothing was sent
    superseded: bool = False  # a newer version of its key was delivered: nothing was sent
    by: Optional[str] = None  # then: the event id of that version (None: forgotten)


class Forwarding:
    def __init__(self, sources: SourceStore, events: HookStore, records: RecordStore,
                 reviews: ReviewStore, sealer: Sealer, clock: Callable[[], Micros],
                 tenant_name: Callable[[int], str], allow_link_local: bool = False,
                 random: Callable[[], float] = _random.random,
                 observed: Any = None, outbound: Optional[Outbound] = None,
                 versions: Optional[VersionStore] = None):
        self.sources, self.events, self.records, self.reviews = sources, events, records, \
            reviews
        self.sealer, self.clock, self.tenant_name = sealer, clock, tenant_name
        self.random, self.observed = random, observed
        # urllib3 itself, not requests on top of it: a forward cost ~0.4 ms of CPU through
        # requests and ~0.2 ms through urllib3, on a relay whose forwards are CPU-bound
        # (bench/NOTES.md, "The gateway"); through the one outbound client, which
        # checks the address it connects to and ends the forward at its deadline.
        self.outbound = outbound or Outbound(Policy("any", allow_link_local),
                                             ca_certs=ca_bundle())
        self.routes = Routes(sealer)
        self.versions = versions  # None: orderings are not kept (no store to keep them)

    def take(self, holder: str, limit: int) -> list[Job]:
        return self.take_some(holder, limit)[0]  # up to `limit` due events, leased to holder

    def take_some(self, holder: str, limit: int, ended: bool = False
                  ) -> tuple[list[Job], bool]:
        """take(), and whether due events were left behind (by `limit`, or by their
        sources' max_in_flight): the relay then takes again as soon as a slot is free.
        With `ended` (the relay's sweep, once a second), also the events of paused sources
        whose retry window has ended: attempt() fails them without a forward."""
        jobs, left, _ = self.take_paced(holder, limit, ended)
        return jobs, left

    def take_paced(self, holder: str, limit: int, ended: bool = False, idle: bool = False
                   ) -> tuple[list[Job], bool, Optional[Micros]]:
        """take_some(), and when a source whose rate held back due events has room again
        (None: none), for the relay to look then; `idle`: its spare slots' take (take.py)."""
        if ended:
            self.end_pauses()
        taken, sources, left, slot = self.events.take_due(holder, self.clock(), limit,
                                                          ended, idle)
        return [Job(e, Source(*sources[e.destination_id]), self.tenant_name(e.tenant_id))
                for e in taken], left, slot

    def end_pauses(self) -> int:
        """Clear the operators' pauses that ended by themselves (their time added to the
        waiting events' retry windows, storage/pauses.py); how many this relay cleared."""
        now, cleared = self.clock(), 0
        for sid, tenant_id, destination_id in self.sources.expired_pauses(now):
            source = self.sources.by_id(sid)
            if source is None or source.tenant_id != tenant_id:
                continue
            view = next((v for v in self.sources.views(source)
                         if v.destination_id == destination_id), None)
            if view is None or view.operator_paused_until is None:
                continue
            try:
                with self.sources.transaction() as cur:
                    self.sources.end_pause(cur, view, view.operator_paused_until, now)
                cleared += 1
            except PauseChanged:  # another relay, or an operator, ended it first
                pass
        return cleared

    def attempt(self, job: Job) -> Result:
        """forward(), except for an event of a paused source (taken because its retry
        window ended while the destination asked to be left alone): it is not sent, and
        fails as an event whose window ended does (the record failed, a review). The
        destination's filter comes first: an event it does not take is filtered, paused or
        not (it would never have been sent)."""
        if (screened := self.screen(job)) is not None:
            return screened
        until = job.source.paused_until
        if until is not None and until > self.clock():
            return Result(None, PAUSED_PAST_WINDOW, "", None, 0)
        return self._send(job)

    def screen(self, job: Job) -> Optional[Result]:
        """The destination's filter (read at the event's turn: a PATCH meanwhile applies):
        a filtered Result when it does not take the event, an error (retried, as a broken
        key's) when the stored filter cannot be read, None when the event goes on. Then
        its ordering: a superseded Result when a version of its key at least as new was
        delivered (compared now: one delivered while this event waited counts)."""
        route = self.route(job.source)
        if route.unusable is not None:
            return Result(None, route.unusable, "", None, 0)
        if not rules.takes(route.filter, job.event.event_type, job.event.body):
            return Result(None, None, "", None, 0, filtered=True)
        keyed = self.versions and ordering.keyed(route.ordering, job.event.body)
        last = keyed and self.versions.last(job.event.tenant_id, job.source.destination_id,
                                            keyed.key)
        if last and keyed.newer_than(last[0]) is False:
            return Result(None, None, "", None, 0, superseded=True, by=last[1])
        return None

    def route(self, source: Source) -> Route:
        return self.routes.of(source)

    def forward(self, job: Job) -> Result:
        """One POST of the event to its destination: original body bytes and Content-Type,
        the provider's headers, the destination's, the gateway's; no redirects followed.
        It ends by the destination's timeout_seconds (connect, status line, headers and
        body together), and always LEASE_END_MARGIN_SECONDS before the attempt's lease.
        None is made for an event the destination's filter does not take (screen())."""
        return self.screen(job) or self._send(job)

    def _send(self, job: Job) -> Result:
        source, event = job.source, job.event
        started = time.monotonic()
        if event.body is None:
            return Result(None, "the body is no longer kept", "", None, 0)
        lease_left = (event.lease_until - self.clock()) / SECOND - LEASE_END_MARGIN_SECONDS \
            if event.lease_until is not None else source.timeout_seconds
        budget = min(source.timeout_seconds, lease_left)
        if budget <= 0:  # the lease is (nearly) gone: another attempt may hold the event
            return Result(None, "the lease ran out before the forward", "", None, 0)
        route = self.route(source)
        if route.broken:  # retried: the key may be put back within the retry window
            return Result(None, BROKEN, "", None, 0)
        signature = standard.sign(route.secret, rules.header_id(event.event_id),
                                  self.clock() // SECOND, event.body) if route.secret else None
        headers = rules.forward_headers(json.loads(event.headers), route.headers,
                                        event.event_id, event.attempts, signature)
        reply = self.outbound.request("POST", source.destination_url, event.body, headers,
                                      budget, rules.ANSWER_KEPT_BYTES)
        if reply.status is None:
            return Result(None, reply.error, "", None, _ms(started))
        mark = route.forward.get("delivered_header")
        return Result(reply.status, None, rules.answer_text(reply.body),
                      reply.headers.get("Retry-After"), _ms(started),
                      marked=mark is None or mark in reply.headers)

    def settle(self, job: Job, holder: str, result: Result) -> Optional[Outcome]:
        """Write the attempt's end; None when its lease was taken over meanwhile."""
        return self.settle_many(holder, [(job, result)]).get(job.event.id)

    def settle_many(self, holder: str, ended: list[tuple[Job, Result]]
                    ) -> dict[int, Outcome]:
        """Write the ends of several attempts in one transaction (one commit: a relay's
        forwards that end together, see Relay); the outcome of each by its event's row id,
        missing for an attempt whose lease was taken over meanwhile. On PostgreSQL the
        attempts that do not open a review are one statement each, all sent at once, and
        the sources' rows go with the COMMIT: three round trips whatever their number."""
        now = self.clock()
        plans = [(job, result, *self._plan(job, result, now)) for job, result in ended]
        out: dict[int, Outcome] = {}
        with self.events.steps() as steps:
            quick, slow = self._split(holder, now, plans)
            rows = iter(steps.send([s for _, stmts in quick for s in stmts]))
            for (job, _, outcome, *_), stmts in quick:
                if [next(rows) for _ in stmts][-1]:
                    out[job.event.id] = outcome
            for (job, result, outcome, next_at, _), _ in sorted(  # records locked in order
                    slow, key=lambda planned: planned[0][0].event.record_id):
                if self._write(steps.cursor(), job, holder, result, outcome, next_at, now):
                    out[job.event.id] = outcome
            self._advance(steps, [job for job, *_ in plans
                                  if out.get(job.event.id) is Outcome.DELIVERED], now)
            self.events.unpark(steps, [job.event for job, *_ in plans if out.get(
                job.event.id) not in (None, Outcome.RETRY)], now, tuple(
                job.event for job, *_ in plans if out.get(job.event.id) is Outcome.RETRY))
            # per (destination, tenant): its newest attempt's error, pause, health
            last_error: dict[tuple[int, int], Optional[str]] = {}
            pauses: dict[tuple[int, int], Micros] = {}
            health: dict[tuple[int, int], Health] = {}
            for job, result, outcome, _, after in plans:
                if job.event.id in out and outcome not in UNSENT:  # it says nothing
                    did = (job.source.destination_id, job.source.tenant_id)
                    last_error[did] = _reason(outcome, result)
                    if rules.pauses_source(result.status, after):
                        pauses[did] = max(after, pauses.get(did, after))
                    self._health(health, job, outcome, result, now)
            # A rate's slot taken for an event that made no forward is given back.
            unsent = Counter((job.source.destination_id, job.source.tenant_id)
                             for job, *_ in plans if out.get(job.event.id) in UNSENT and
                             job.source.rate_interval_us is not None)
            # The destinations' rows last and in order, as take_due locks them (after its
            # events): two relays' transactions cannot wait on each other in a cycle.
            steps.send([stmt for did in sorted(set(last_error) | set(unsent)) for stmt in (
                self.events.source_changes(*did, last_error[did], now, pauses.get(did),
                                           health.get(did)) if did in last_error else [])
                + ([self.sources.given_back(*did, unsent[did])] if did in unsent else [])],
                last=True)
        if self.observed is not None:
            for job, result, *_ in plans:
                if job.event.id in out:
                    self.observed.forward(job.tenant, job.source.name,
                                          job.source.destination_name,
                                          out[job.event.id].value, result.duration_ms / 1000)
        return out

    def _split(self, holder: str, now: Micros, plans: list) -> tuple[list, list]:
        """The plans settled by statements sent at once (PostgreSQL, no review), each with
        its statements, in order of their records; and the others, each on its own. The end
        of one of several deliveries locks its record first, then reads the others: of two
        ending at once, the later sees the other's end."""
        quick, slow = [], []
        for plan in plans:
            fan = plan[0].source.fanout > 1 and plan[2] is not Outcome.RETRY
            stmt = None if plan[2] is Outcome.FAILED else self._settled(
                holder, now, *plan, fanout=fan)
            stmts = None if stmt is None else [stmt] if not fan else [
                self.records.lock(plan[0].event.tenant_id, plan[0].event.record_id), stmt]
            (quick if stmts else slow).append((plan, stmts))
        return sorted(quick, key=lambda planned: planned[0][0].event.record_id), slow

    def _advance(self, steps: Any, delivered: list[Job], now: Micros) -> None:
        """The delivered events' versions become their keys' last (when newer), in the
        settle's transaction; keys in order, so two relays' locks cannot cross."""
        keyed = [(job, k) for job in delivered if self.versions
                 and (k := ordering.keyed(self.route(job.source).ordering, job.event.body))]
        for job, k in sorted(keyed, key=lambda jk: (jk[0].source.destination_id, jk[1].key)):
            self.versions.advance(steps.cursor(), job.event.tenant_id, job.source.destination_id,
                                  k.key, k.text, job.event.id, now, k.newer_than)

    @staticmethod
    def _health(health: dict[tuple[int, int], Health], job: Job, outcome: Outcome,
                result: Result,
                now: Micros) -> None:
        """What this attempt says of its source's destination, into `health` (by
        destination): a success ends a failing run (it wins over failures settled with it);
        a failure that says the destination is down sets the next probe."""
        did = (job.source.destination_id, job.source.tenant_id)
        if outcome is Outcome.DELIVERED:
            if job.source.failing_since is not None:  # the statement checks the row again
                health[did] = Health(job.source.tenant_id,
                                     since=now - RECOVERY_AFTER_SECONDS * SECOND)
        elif _down(outcome, result) and (did not in health or health[did].probe_at):
            health[did] = Health(job.source.tenant_id,
                                 probe_at=now + take.PROBE_SECONDS * SECOND)

    def _settled(self, holder: str, now: Micros, job: Job, result: Result, outcome: Outcome,
                 next_at: Optional[Micros], _after: Optional[Micros], fanout: bool = False
                 ) -> Optional[tuple[Any, dict]]:
        """The settle of an attempt that opens no review as one statement (PostgreSQL);
        with `fanout`, its record ends only when no other delivery of it is unsettled."""
        ends = outcome in ENDS_WELL
        return self.events.settled(
            job.event, holder, _STATES[outcome], now, next_at, result.duration_ms,
            result.status, result.error, result.answer,
            record_state=State.SUCCEEDED.value if ends else None,
            result=_ending(outcome, result) if ends else None, fanout=fanout)

    def _plan(self, job: Job, result: Result, now: Micros
              ) -> tuple[Outcome, Optional[Micros], Optional[Micros]]:
        """What an answer means: the outcome, the next attempt's time if any, and how long
        the destination asked to be left alone (Retry-After)."""
        if result.filtered or result.superseded:
            return Outcome.FILTERED if result.filtered else Outcome.SUPERSEDED, None, None
        forward = self.route(job.source).forward
        outcome = rules.classify(result.status, forward.get("retry_statuses", ()),
                                 result.marked) if result.error is None or \
            result.status is not None else (Outcome.FAILED if _final(result.error)
                                            else Outcome.RETRY)
        after = rules.retry_after(result.retry_after, now, job.source.max_pause_seconds)
        next_at = None
        if outcome is Outcome.RETRY:
            end = window_end(job.event, job.source)
            next_at = rules.next_attempt(job.event.attempts, now, after, end, self.random)
            if next_at is None:
                outcome = Outcome.FAILED  # the next try would fall after the window
        return outcome, next_at, after

    def _write(self, cur, job: Job, holder: str, result: Result, outcome: Outcome,
               next_at: Optional[Micros], now: Micros) -> bool:
        """The event's state, its attempt and (when it ends) its record, if the attempt
        still holds its lease."""
        event = job.event
        state = _STATES[outcome]
        if not self.events.settle(cur, event, holder, state, now, next_at):
            return False
        if outcome not in UNSENT:  # a filtered or superseded event made no forward
            self.events.record_attempt(cur, event, now, result.duration_ms, result.status,
                                       result.error, result.answer)
        if outcome is not Outcome.RETRY:
            self._settle_record(cur, event, outcome, result, now, job.source.destination_name)
        return True

    def _settle_record(self, cur, event: Event, outcome: Outcome, result: Result,
                       now: Micros, destination: str) -> None:
        """The record's end after one of its deliveries ended: `failed` at the first that
        failed for good, and each failed delivery's own delivery_failed review; `succeeded`
        once every delivery ended well. A record a person settled meanwhile stands."""
        seen = self.records.locked(cur, event.tenant_id, event.record_id)
        if seen is None:
            return
        if outcome not in ENDS_WELL:
            if seen.state == State.IN_PROGRESS.value:
                seen = self._end_record(cur, seen, State.FAILED.value, outcome, result, now)
            if seen is not None and seen.state == State.FAILED.value:
                last = self.events.attempts_of(cur, [event.id]).get(event.id, [])[-5:]
                kept = json.dumps({"attempts": [
                    {"at": a.at, "status_code": a.status_code, "error": a.error,
                     "answer": (a.answer or "")[:512]} for a in last]})
                self.reviews.open_or_count(cur, seen, domain.ReviewKind.DELIVERY_FAILED, now,
                                           kept=kept, destination=destination)
            return
        if seen.state != State.IN_PROGRESS.value:
            return  # a person settled it, or another delivery failed for good: it stands
        # Read after the lock: of two deliveries ending at once, the later sees the other's
        # end, so the record ends once every delivery did.
        states = self.events.states_of(cur, event.tenant_id, event.record_id)
        if any(states.get(s.value) for s in (DeliveryState.QUEUED, DeliveryState.DELIVERING)):
            return
        self._end_record(cur, seen, State.SUCCEEDED.value, outcome, result, now)

    def _end_record(self, cur, seen, state: str, outcome: Outcome, result: Result,
                    now: Micros):
        changes = {"state": state, "lease_expires_at": None, "result_resource_id": None,
                   "result": _ending(outcome, result)}
        return self.records.compare_and_set(seen, changes, cur,
                                            {"ending": state, "ended_at": now})


_STATES = {Outcome.DELIVERED: DeliveryState.DELIVERED.value,  # an attempt's outcome: its state
           Outcome.RETRY: DeliveryState.QUEUED.value, Outcome.FAILED: DeliveryState.FAILED.value,
           Outcome.FILTERED: DeliveryState.FILTERED.value,
           Outcome.SUPERSEDED: DeliveryState.SUPERSEDED.value}


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
