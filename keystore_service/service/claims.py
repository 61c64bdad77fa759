"""Use cases: claim, complete, release, extend, lookup, expire. One use case, one transaction.

The service reads the clock once per call and passes `now` down; the domain decides, the
store writes with compare-and-set, and a lost race is decided again on the fresh row (the one
loop: phases.py; a claim's three paths: claim_paths.py). Refusals are raised as `errors.*`
carrying the record they are about (outcomes.py).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Optional, TypeVar, Union

from keystore_service import errors
from keystore_service.domain import records as domain
from keystore_service.domain.records import Action, Micros, Outcome, Record, State, Verdict
from keystore_service.service.claim_paths import Attempt, ClaimPaths
from keystore_service.service.counting import RepeatCounts
from keystore_service.service.fencing import lease_lost, proposed_or_new
from keystore_service.service.grouping import Groups
from keystore_service.service.outcomes import Claimed, refusal, verdict_error
from keystore_service.service.phases import AGAIN, Again, atomic_phase, through_outages
from keystore_service.storage.accounts import hash_token
from keystore_service.storage.records import RecordStore, new_record_values
from keystore_service.storage.reviews import Review, ReviewStore
from keystore_service.storage.traces import TraceStore

Clock = Callable[[], Micros]
T = TypeVar("T")
# Stored results one answer may carry (a batch's replays, a page of reviews). A result body
# is at most 256 KiB, so 16 full-size results; without a bound, one 1.5 KB batch naming a key
# 100 times built a 26 MB answer, 1,000 times ~260 MB in one worker (issue 13, item 3).
ANSWER_RESULTS_BYTES = 4 * 1024 * 1024


def system_clock() -> Micros:
    return time.time_ns() // 1000


@dataclass(frozen=True, slots=True)
class Claim:
    scope: str
    key: str
    fingerprint: Optional[str]
    ttl_seconds: int
    lease_seconds: int
    on_stale: str
    version_kind: Optional[str] = None
    version: Optional[int] = None
    lease_token: Optional[str] = None  # proposed by the client (v1.1); else one is made
    on_late_repeat: str = domain.LatePolicy.ALLOW.value
    kept_payload: Optional[str] = None  # canonical JSON, when the claim asked to keep it


class ClaimObserver:
    """Told of claim outcomes as the service meets them (metrics.Metrics subscribes); this
    default ignores them. Not storage/events.py's webhook events."""

    def lease_expired(self, scope: str, cur=None, count: int = 1) -> None:
        pass

    def late_repeat(self, scope: str) -> None:
        pass

    def claim_group(self, size: int) -> None:
        """A claim statement was sent carrying `size` claims (group commit)."""


class KeyStoreService:
    def __init__(self, records: RecordStore, reviews: ReviewStore, clock: Clock = system_clock,
                 observer: Optional[ClaimObserver] = None, outage_seconds: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep,
                 traces: Optional[TraceStore] = None, late_window_seconds: int = 0,
                 group_commit: bool = False, counts: Optional[RepeatCounts] = None):
        self.records = records
        self.reviews = reviews
        self.traces = traces
        self.late_window = late_window_seconds * domain.SECOND if traces is not None else 0
        self.clock = clock
        self.sleep = sleep
        self.observer = observer or ClaimObserver()
        self.outage_seconds = outage_seconds
        self.counts = counts  # repeats counted after the answer (counting.py), or in it
        # Concurrent claims of this process as one statement and one commit (grouping.py).
        self.groups: Optional[Groups] = Groups(
            lambda many: self.records.claim_many(many),
            lambda values: self.records.claim_with_trace(values),
            sent=lambda size: self.observer.claim_group(size)) if group_commit else None
        self.paths = ClaimPaths(self)

    # --- claim -------------------------------------------------------------------------

    def claim(self, tenant_id: int, c: Claim, wait_seconds: float = 0) -> Claimed:
        """Claim (tenant, scope, key) by docs/api.md's table. With `wait_seconds`, a claim
        that would answer in_progress first waits (no transaction held) until the record
        changes or the time is up, then claims once: one repeat, counted once."""
        token, token_hash = proposed_or_new(c.lease_token)
        query = domain.ClaimRequest(c.fingerprint, c.version_kind, c.version, token_hash)
        deadline = time.monotonic() + wait_seconds

        def running(seen: Record, now: Micros) -> bool:
            return domain.decide_claim(seen, query, now).outcome is Outcome.IN_PROGRESS
        if wait_seconds > 0:
            self._wait_while(tenant_id, c.scope, c.key, wait_seconds, running)
        try:
            return self._claim_now(tenant_id, c, query, token, token_hash)
        except errors.InProgress as busy:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            # A claim that arrived with the first (it lost the insert race) was answered
            # in_progress and counted: wait the time left, then answer by the table without
            # counting that one repeat twice (issue 15: 4 of 40 racing duplicates were told
            # in_progress at once although they could wait).
            seen, now = self._wait_while(tenant_id, c.scope, c.key, left, running)
            decision = domain.decide_claim(seen, query, now) if seen is not None else None
            if decision is not None and decision.outcome is Outcome.REPLAY:
                return Claimed(Outcome.REPLAY, seen)
            if decision is not None and decision.outcome is Outcome.IN_PROGRESS:
                raise refusal(Outcome.IN_PROGRESS, seen, now) from busy
            return self._claim_now(tenant_id, c, query, token, token_hash)

    def _claim_now(self, tenant_id: int, c: Claim, query: domain.ClaimRequest, token: str,
                   token_hash: str) -> Claimed:
        now = self.clock()
        values = new_record_values(
            tenant_id, c.scope, c.key, c.fingerprint, token_hash, now,
            now + c.lease_seconds * domain.SECOND, now + c.ttl_seconds * domain.SECOND,
            c.on_stale, c.version_kind, c.version)
        return self.through_outages(lambda: self._claim(Attempt(tenant_id, c, values, query,
                                                                token, now)))

    def _claim(self, a: Attempt) -> Claimed:
        claimed = self.paths.claim(a)
        if a.claim.kept_payload is not None and claimed.outcome is Outcome.ACQUIRED \
                and not claimed.resumed:
            self.records.keep_payload(claimed.record, a.claim.kept_payload)
        return claimed

    def through_outages(self, call: Callable[[], T]) -> T:
        """`call`, repeated while the database is unavailable for up to `outage_seconds`
        (phases.through_outages says why that is safe), pausing with the injected sleep."""
        return through_outages(call, self.outage_seconds, self.sleep)

    def refuse(self, cur, outcome: Outcome, seen: Record, fingerprint: Optional[str],
               now: Micros, kept_payload: Optional[str] = None) -> errors.KeystoreError:
        """A refused claim leaves the record untouched; a mismatch counts on its review (and
        keeps the refused payload there when the claim asked to keep it)."""
        if outcome is Outcome.FINGERPRINT_MISMATCH:
            kept = None if kept_payload is None else json.dumps({"payload": kept_payload})
            review = self.reviews.open_or_count(
                cur, seen, domain.ReviewKind.FINGERPRINT_MISMATCH, now,
                refused_fingerprint=fingerprint, kept=kept)
            seen = replace(seen, review_id=seen.review_id or review.id)
        return refusal(outcome, seen, now)

    def after_claim(self, cur, decision: domain.ClaimDecision, seen: Record, new: Record,
                    now: Micros) -> Record:
        """The reviews a claim's write opens, counts on or supersedes (same transaction)."""
        if decision.action is Action.NEW_INCARNATION:
            if seen.review_id is not None:
                self.reviews.close(cur, seen.id, "superseded", now)
                new = replace(new, review_id=None)
        elif new.state == State.NEEDS_RECONCILIATION.value:
            review = self.reviews.open_or_count(cur, new, domain.ReviewKind.STALE_LEASE, now)
            new = replace(new, review_id=new.review_id or review.id)
        if seen.state == State.IN_PROGRESS.value and domain.lease_ran_out(seen, now):
            self.observer.lease_expired(seen.scope, cur)
        return new

    # --- the holder's calls ------------------------------------------------------------

    def complete(self, tenant_id: int, scope: str, key: str, lease_token: str, state: str,
                 result: str, resource_id: Optional[str] = None) -> Record:
        def decide(seen: Optional[Record], h: str, now: Micros):
            verdict = domain.decide_complete(seen, h, state, result, now)
            return verdict, {"state": state, "result": result, "lease_expires_at": None,
                             "result_resource_id": resource_id}, \
                {"ending": state, "ended_at": now}
        return self._holder_call(tenant_id, scope, key, lease_token, decide,
                                 "completed_by_holder")

    def release(self, tenant_id: int, scope: str, key: str, lease_token: str,
                reason: Optional[str]) -> Record:
        def decide(seen: Optional[Record], h: str, now: Micros):
            verdict = domain.decide_release(seen, h, now)
            return verdict, {"state": State.RELEASED.value, "lease_expires_at": None}, \
                {"ending": "released", "ended_at": now, "reason": reason}
        return self._holder_call(tenant_id, scope, key, lease_token, decide,
                                 "released_by_holder")

    def extend(self, tenant_id: int, scope: str, key: str, lease_token: str, lease_seconds: int,
               checkpoint: Optional[str], resource_id: Optional[str]) -> Record:
        def decide(seen: Optional[Record], h: str, now: Micros):
            verdict = domain.decide_extend(seen, h, now)
            changes: dict = {"state": State.IN_PROGRESS.value,
                             "lease_expires_at": now + lease_seconds * domain.SECOND}
            if checkpoint is not None:
                changes["checkpoint_step"] = checkpoint
            if resource_id is not None:
                changes["checkpoint_resource_id"] = resource_id
            if checkpoint is not None or resource_id is not None:
                changes["checkpoint_at"] = now
            return verdict, changes, None
        return self._holder_call(tenant_id, scope, key, lease_token, decide,
                                 "extended_by_holder")

    def _holder_call(self, tenant_id: int, scope: str, key: str, lease_token: str,
                     decide, resolution: str) -> Record:
        """The holder settles or revives its attempt; that closes a stale_lease review."""
        now = self.clock()
        token_hash = hash_token(lease_token)

        def step(cur) -> Union[Record, Again]:
            seen = self.records.get(tenant_id, scope, key, cur)
            verdict, changes, ended = decide(seen, token_hash, now)
            if verdict is Verdict.ALREADY_DONE:
                return seen
            if verdict is Verdict.LEASE_LOST:  # says why: never held, replaced, released
                raise lease_lost(seen, lease_token, token_hash)
            if verdict is not Verdict.APPLY:
                raise verdict_error(verdict, seen, now)
            new = self.records.compare_and_set(seen, changes, cur, ended)
            if new is None:
                return AGAIN
            if new.review_id is not None and self.reviews.close(
                    cur, new.id, resolution, now, kind=domain.ReviewKind.STALE_LEASE):
                new = self.records.get(tenant_id, scope, key, cur)  # its review pointer
            return new
        return self.through_outages(lambda: atomic_phase(self.records.transaction, step))

    def open_review(self, record: Record) -> Optional[Review]:
        """The record's oldest open review, or None (without a query when it has none)."""
        if record.review_id is None:
            return None
        review = self.reviews.get(record.review_id)
        return review if review is not None and review.state == "open" else None

    # --- reading and expiring ----------------------------------------------------------

    def lookup(self, tenant_id: int, scope: str, key: str, wait_seconds: float = 0) -> Record:
        """The record as stored; with a wait, until an in-progress record changes state."""
        seen, now = self._wait_while(tenant_id, scope, key, wait_seconds, lambda seen, now: (
            seen.state == State.IN_PROGRESS.value))
        if seen is None or domain.expired(seen, now):
            raise verdict_error(Verdict.NOT_FOUND if seen is None else Verdict.EXPIRED,
                                seen, now)
        return seen

    def _wait_while(self, tenant_id: int, scope: str, key: str, seconds: float,
                    waiting: Callable[[Record, Micros], bool]) -> tuple[Optional[Record], Micros]:
        """Read the record until `waiting(record, now)` is false (or it is gone or expired),
        or `seconds` are up; returns the last read. Reads every 50 ms, slowing to 500 ms;
        no transaction or connection is held between reads."""
        deadline = time.monotonic() + seconds
        pause = 0.05
        while True:
            now = self.clock()
            # A read is always safe to repeat: the first lookup after a database restart
            # finds its pooled connection dead, and gets an answer on a new one, not a 503.
            seen = self.through_outages(lambda: self.records.get(tenant_id, scope, key))
            left = deadline - time.monotonic()
            if seen is None or domain.expired(seen, now) or left <= 0 \
                    or not waiting(seen, now):
                return seen, now
            self.sleep(min(pause, left))
            pause = min(pause * 1.5, 0.5)

    def expire(self, tenant_id: int, scope: str, key: str,
               audit: Optional[Callable[..., None]] = None) -> Record:
        """End the record's window now; `audit(cur, before, after, now)` is written in the
        same transaction when the record changed."""
        now = self.clock()

        def step(cur) -> Union[Record, Again]:
            seen = self.records.get(tenant_id, scope, key, cur)
            verdict = domain.decide_expire(seen, now)
            if verdict is Verdict.ALREADY_DONE:
                return seen
            if verdict is not Verdict.APPLY:
                raise verdict_error(verdict, seen, now)
            new = self.records.compare_and_set(seen, {"expires_at": now}, cur)
            if new is None:
                return AGAIN
            if audit is not None:
                audit(cur, seen, new, now)
            return new
        return atomic_phase(self.records.transaction, step)
