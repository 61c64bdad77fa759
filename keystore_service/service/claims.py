"""Use cases: claim, complete, release, extend, lookup, expire. One use case, one transaction.

The service reads the clock once per call and passes `now` down; the domain decides, the
store writes with compare-and-set, and a lost race is decided again on the fresh row.
Refusals are raised as `errors.*` carrying the record they are about.
"""
from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Optional, TypeVar

from keystore_service import errors
from keystore_service.domain import records as domain
from keystore_service.domain.records import Action, Micros, Outcome, Record, State, Verdict
from keystore_service.domain.upkeep import claim_changes
from keystore_service.service.counting import RepeatCounts
from keystore_service.service.fencing import lease_lost
from keystore_service.service.grouping import Groups
from keystore_service.storage.accounts import hash_token
from keystore_service.storage.records import RecordStore, new_record_values
from keystore_service.storage.reviews import Review, ReviewStore
from keystore_service.storage.traces import TraceStore

Clock = Callable[[], Micros]
T = TypeVar("T")
ROUNDS = 16  # lost compare-and-set races before giving up with 503; each needs a writer
# Stored results one answer may carry (a batch's replays, a page of reviews). A result body
# is at most 256 KiB, so 16 full-size results; without a bound, one 1.5 KB batch naming a key
# 100 times built a 26 MB answer, 1,000 times ~260 MB in one worker (issue 13, item 3).
ANSWER_RESULTS_BYTES = 4 * 1024 * 1024


def system_clock() -> Micros:
    return time.time_ns() // 1000


def new_lease_token() -> tuple[str, str]:
    """A fresh lease token (192 random bits) and the hash that is stored instead of it."""
    token = "lt_" + secrets.token_urlsafe(24)
    return token, hash_token(token)


def proposed_or_new(proposed: Optional[str]) -> tuple[str, str]:
    """The client's proposed lease token (checked by the schema) and its hash, or a new one."""
    return (proposed, hash_token(proposed)) if proposed else new_lease_token()


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


@dataclass(frozen=True, slots=True)
class Claimed:
    outcome: Outcome  # ACQUIRED or REPLAY; the other outcomes are raised
    record: Record
    lease_token: Optional[str] = None
    resumed: bool = False  # the claimant's own attempt, found again (its answer was lost)
    late: Optional[domain.Trace] = None  # acquired, but a late repeat of this trace


_VERDICT_ERRORS = {
    Verdict.NOT_FOUND: errors.NotFound, Verdict.EXPIRED: errors.Expired,
    Verdict.LEASE_LOST: errors.LeaseLost, Verdict.ALREADY_COMPLETED: errors.AlreadyCompleted,
}


class Events:
    """What the service reports as it goes (metrics subscribe); the default ignores it."""

    def lease_expired(self, scope: str, cur=None, count: int = 1) -> None:
        pass

    def late_repeat(self, scope: str) -> None:
        pass

    def claim_group(self, size: int) -> None:
        """A claim statement was sent carrying `size` claims (group commit)."""


class KeyStoreService:
    def __init__(self, records: RecordStore, reviews: ReviewStore, clock: Clock = system_clock,
                 events: Optional[Events] = None, outage_seconds: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep,
                 traces: Optional[TraceStore] = None, late_window_seconds: int = 0,
                 group_commit: bool = False, counts: Optional[RepeatCounts] = None):
        self.records = records
        self.reviews = reviews
        self.traces = traces
        self.late_window = late_window_seconds * domain.SECOND if traces is not None else 0
        self.clock = clock
        self.sleep = sleep
        self.events = events or Events()
        self.outage_seconds = outage_seconds
        self.counts = counts  # repeats counted after the answer (counting.py), or in it
        # Concurrent claims of this process as one statement and one commit (grouping.py).
        self.groups: Optional[Groups] = Groups(
            lambda many: self.records.claim_many(many),
            lambda values: self.records.claim_with_trace(values),
            sent=lambda size: self.events.claim_group(size)) if group_commit else None

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
        return self.through_outages(lambda: self._claim(tenant_id, c, values, query, token,
                                                         now))

    def _claim(self, tenant_id: int, c: Claim, values: dict, query: domain.ClaimRequest,
               token: str, now: Micros) -> Claimed:
        claimed = self._decide(tenant_id, c, values, query, token, now)
        if c.kept_payload is not None and claimed.outcome is Outcome.ACQUIRED \
                and not claimed.resumed:
            self.records.keep_payload(claimed.record, c.kept_payload)
        return claimed

    def _decide(self, tenant_id: int, c: Claim, values: dict, query: domain.ClaimRequest,
                token: str, now: Micros) -> Claimed:
        token_hash = values["lease_token_hash"]
        for _ in range(ROUNDS):
            if self.counts is not None:  # repeats counted later: a repeat costs a read
                # (A plain read, not INSERT ... DO NOTHING: PostgreSQL's insert waits for the
                # row lock of a count being written; measured: replays 3x slower, p99 2.6 s.)
                seen = self.records.get(tenant_id, c.scope, c.key)
                if seen is not None:
                    decision = domain.decide_claim(seen, query, now)
                    if decision.action is Action.COUNT_REPEAT and \
                            seen.state != State.NEEDS_RECONCILIATION.value:
                        return _answer(decision.outcome, self.counts.add(seen, now), now)
            row, hint = self._insert_or_count(values)  # one statement, perhaps shared
            if row is not None:
                if row.lease_token_hash != token_hash:
                    return _answer(domain.decide_claim(row, query, now).outcome, row, now)
                if hint is not None and self.late_window and hint[0] == c.fingerprint \
                        and now < hint[1] + self.late_window:  # the full rule below
                    with self.records.transaction() as cur:
                        trace = self.records.trace(cur, tenant_id, c.scope, c.key)
                        late = self._late(cur, c, row, trace, token, now)
                    if isinstance(late, errors.KeystoreError):
                        raise late  # after the commit: the review stands
                    return late
                return Claimed(Outcome.ACQUIRED, row, token)
            refused = new = None
            with self.records.transaction() as cur:
                seen = self.records.get(tenant_id, c.scope, c.key, cur)
                if seen is None:
                    continue  # purged in between: insert again
                decision = domain.decide_claim(seen, query, now)
                if decision.action is Action.RESUME:  # our own write, found again: its
                    return Claimed(Outcome.ACQUIRED, seen, token, resumed=True)  # answer was
                    # lost in flight (or this request repeated itself through an outage)
                if decision.action is Action.NOTHING:  # the review commits with the refusal
                    refused = self.refuse(cur, decision.outcome, seen, c.fingerprint, now,
                                          c.kept_payload)
                else:
                    changes, ended = claim_changes(decision.action, seen, c.on_stale, values, now)
                    new = self.records.compare_and_set(seen, changes, cur, ended)
                    if new is not None:
                        new = self.after_claim(cur, decision, seen, new, now)
                        if decision.row == "expired":  # an expired record is its own trace
                            late = self._late(cur, c, new, domain.trace_of(seen), token, now)
                            if isinstance(late, errors.KeystoreError):
                                refused = late
                            elif late.late is not None:
                                return late
            if refused is not None:
                raise refused
            if new is not None:
                if decision.outcome is Outcome.ACQUIRED:
                    return Claimed(Outcome.ACQUIRED, new, token)
                return _answer(decision.outcome, new, now)
        raise errors.Unavailable("too much contention on this key; try again")

    def _insert_or_count(self, values: dict) -> tuple[Optional[Record], Optional[tuple]]:
        if self.groups is None:
            return self.records.claim_with_trace(values)
        key = (values["tenant_id"], values["scope"], values["key"])
        return self.groups.submit(key, values) or (None, None)

    def _late(self, cur, c: Claim, new: Record, trace: Optional[domain.Trace], token: str,
              now: Micros) -> Claimed | errors.KeystoreError:
        """A claim that acquired a key afresh: a late repeat of `trace`? Noted, counted, and
        by the claim's policy answered acquired (marked) or refused for a person (the error
        to raise once the transaction has committed)."""
        if not domain.late_repeat(trace, c.fingerprint, now, self.late_window):
            return Claimed(Outcome.ACQUIRED, new, token)
        self.traces.note(cur, new.tenant_id, new.scope, new.key, trace, c.on_late_repeat, now)
        self.events.late_repeat(new.scope)
        if c.on_late_repeat == domain.LatePolicy.ALLOW.value:
            return Claimed(Outcome.ACQUIRED, new, token, late=trace)
        held = self.records.compare_and_set(
            new, {"state": State.NEEDS_RECONCILIATION.value}, cur)
        review = self.reviews.open_or_count(cur, held, domain.ReviewKind.LATE_REPEAT, now,
                                            count=0)
        refused = errors.NeedsReconciliation(
            "the key came back after its window with the fingerprint it had: probably the "
            "old event sent again; a person decides", record=replace(
                held, review_id=held.review_id or review.id),
            outcome=Outcome.NEEDS_RECONCILIATION.value)
        refused.late = trace  # rendered into details.late_repeat by the API
        return refused

    def through_outages(self, call: Callable[[], T]) -> T:
        """Repeat `call` while the database is unavailable, for up to `outage_seconds`.

        Safe because every call repeated here recognises its own earlier write: a claim by
        its new lease token's hash, a complete or release as the same request again. So a
        commit whose answer was lost when the database went away is found, not doubled, and
        the client gets its answer instead of an unknown outcome."""
        deadline = time.monotonic() + self.outage_seconds
        pause = 0.05
        while True:
            try:
                return call()
            except errors.Unavailable:
                if time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 1.0)

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
            self.events.lease_expired(seen.scope, cur)
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
        return self.through_outages(lambda: self._holder_rounds(
            tenant_id, scope, key, lease_token, decide, resolution, now))

    def _holder_rounds(self, tenant_id: int, scope: str, key: str, lease_token: str, decide,
                       resolution: str, now: Micros) -> Record:
        token_hash = hash_token(lease_token)
        for _ in range(ROUNDS):
            with self.records.transaction() as cur:
                seen = self.records.get(tenant_id, scope, key, cur)
                verdict, changes, ended = decide(seen, token_hash, now)
                if verdict is Verdict.ALREADY_DONE:
                    return seen
                if verdict is Verdict.LEASE_LOST:  # says why: never held, replaced, released
                    raise lease_lost(seen, lease_token, token_hash)
                if verdict is not Verdict.APPLY:
                    raise _verdict_error(verdict, seen, now)
                new = self.records.compare_and_set(seen, changes, cur, ended)
                if new is not None and new.review_id is not None and \
                        self.reviews.close(cur, new.id, resolution, now,
                                       kind=domain.ReviewKind.STALE_LEASE):
                    new = self.records.get(tenant_id, scope, key, cur)  # its review pointer
            if new is not None:
                return new
        raise errors.Unavailable("too much contention on this key; try again")

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
            raise _verdict_error(Verdict.NOT_FOUND if seen is None else Verdict.EXPIRED,
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
        for _ in range(ROUNDS):
            with self.records.transaction() as cur:
                seen = self.records.get(tenant_id, scope, key, cur)
                verdict = domain.decide_expire(seen, now)
                if verdict is Verdict.ALREADY_DONE:
                    return seen
                if verdict is not Verdict.APPLY:
                    raise _verdict_error(verdict, seen, now)
                new = self.records.compare_and_set(seen, {"expires_at": now}, cur)
                if new is not None and audit is not None:
                    audit(cur, seen, new, now)
            if new is not None:
                return new
        raise errors.Unavailable("too much contention on this key; try again")


def _answer(outcome: Outcome, record: Record, now: Micros) -> Claimed:
    if outcome is Outcome.REPLAY:
        return Claimed(Outcome.REPLAY, record)
    raise refusal(outcome, record, now)


def refusal(outcome: Outcome, record: Record, now: Micros) -> errors.KeystoreError:
    """The error that answers a refused claim, carrying the record as it now is."""
    if outcome is Outcome.VERSION_KIND_CONFLICT:
        return errors.InvalidRequest(
            "this record's versions are of the other kind (integer or timestamp)",
            details={"field": "version", "stored_kind": record.version_kind}, record=record)
    if outcome is Outcome.IN_PROGRESS:
        seconds = domain.retry_after_seconds(record, now)
        return errors.InProgress(record=record, outcome=outcome.value,
                                 details={"retry_after_seconds": seconds},
                                 headers={"Retry-After": str(seconds)})
    if outcome is Outcome.NEEDS_RECONCILIATION:
        return errors.NeedsReconciliation(record=record, outcome=outcome.value)
    return errors.FingerprintMismatch(record=record, outcome=outcome.value)


def _verdict_error(verdict: Verdict, record: Optional[Record], now: Micros):
    if verdict is Verdict.IN_PROGRESS:
        seconds = domain.retry_after_seconds(record, now)
        return errors.InProgress("a live lease holds the record; resolve it first",
                                 record=record, details={"retry_after_seconds": seconds},
                                 headers={"Retry-After": str(seconds)})
    shown = record if verdict in (Verdict.LEASE_LOST, Verdict.ALREADY_COMPLETED) else None
    return _VERDICT_ERRORS[verdict](record=shown)
