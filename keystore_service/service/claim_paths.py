"""One claim by docs/api.md's claim table, in its three paths, decided again on a lost race:

    fast      repeats counted after the answer (counting.py): a plain repeat is one read
    insert    one insert-or-count statement (shared by concurrent claims, grouping.py): the
              key acquired afresh, perhaps a late repeat of its trace, or a plain repeat
    conflict  the record was there: its row read in a transaction, decided, written by
              compare-and-set; a lost race or a purge is decided again (phases.py)

A late repeat is noted, counted and, by the claim's policy, marked or held for a person
(LateRepeat, raised once the review it opened has committed).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional, Union

from keystore_service.domain import records as domain
from keystore_service.domain.records import Action, Micros, Outcome, Record, State
from keystore_service.domain.upkeep import claim_changes
from keystore_service.service.outcomes import Claimed, LateRepeat, answer
from keystore_service.service.phases import AGAIN, Again, Refused, retry_on_conflict

if TYPE_CHECKING:
    from keystore_service.service.claims import Claim, KeyStoreService

Answered = Union[Claimed, Refused]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One claim as it is decided: the request, the row it would insert, its token, its now."""

    tenant_id: int
    claim: Claim
    values: dict
    query: domain.ClaimRequest
    token: str
    now: Micros


class ClaimPaths:
    """The service's claim, decided on its stores (read from the service at each use)."""

    def __init__(self, service: KeyStoreService):
        self.service = service

    def claim(self, a: Attempt) -> Claimed:
        """Claimed, or the refusal raised; errors.Unavailable after too many lost races."""
        return retry_on_conflict(lambda: self._round(a))

    def _round(self, a: Attempt) -> Union[Answered, Again]:
        if self.service.counts is not None:
            counted = self._fast_path(a)
            if counted is not None:
                return counted
        inserted = self._insert_path(a)
        return inserted if inserted is not None else self._conflict_path(a)

    def _fast_path(self, a: Attempt) -> Optional[Answered]:
        """A plain repeat answered from one read and counted later; None otherwise."""
        # (A plain read, not INSERT ... DO NOTHING: PostgreSQL's insert waits for the row
        # lock of a count being written; measured: replays 3x slower, p99 2.6 s.)
        seen = self.service.records.get(a.tenant_id, a.claim.scope, a.claim.key)
        if seen is None:
            return None
        decision = domain.decide_claim(seen, a.query, a.now)
        if decision.action is Action.COUNT_REPEAT and \
                seen.state != State.NEEDS_RECONCILIATION.value:
            return answer(decision.outcome, self.service.counts.add(seen, a.now), a.now)
        return None

    def _insert_path(self, a: Attempt) -> Optional[Answered]:
        """The key inserted (acquired) or a plain repeat counted, by one statement; None
        when the record's row must be decided (nothing was written)."""
        row, trace_summary = self._insert_or_count(a.values)
        if row is None:
            return None
        if row.lease_token_hash != a.values["lease_token_hash"]:
            return answer(domain.decide_claim(row, a.query, a.now).outcome, row, a.now)
        # The statement returns the trace's summary, (fingerprint, expired_at), all that the
        # rule reads: only a claim it may concern reads the whole trace (and is decided again).
        if trace_summary is not None and domain.late_repeat(
                domain.Trace(trace_summary[0], None, 0, trace_summary[1]),
                a.claim.fingerprint, a.now, self.service.late_window):
            records = self.service.records
            with records.transaction() as cur:
                trace = records.trace(cur, a.tenant_id, a.claim.scope, a.claim.key)
                late = self._late(cur, a, row, trace)  # its review commits with a refusal
            if late is not None:
                return late
        return Claimed(Outcome.ACQUIRED, row, a.token)

    def _conflict_path(self, a: Attempt) -> Union[Answered, Again]:
        """The record's row decided in a transaction and written by compare-and-set; AGAIN
        when it changed or went in between."""
        service, records, c = self.service, self.service.records, a.claim
        with records.transaction() as cur:
            seen = records.get(a.tenant_id, c.scope, c.key, cur)
            if seen is None:
                return AGAIN  # purged in between: insert again
            decision = domain.decide_claim(seen, a.query, a.now)
            if decision.action is Action.RESUME:  # our own write, found again: its answer
                # was lost in flight (or this request repeated itself through an outage)
                return Claimed(Outcome.ACQUIRED, seen, a.token, resumed=True)
            if decision.action is Action.NOTHING:  # the review commits with the refusal
                return Refused(service.refuse(cur, decision.outcome, seen, c.fingerprint,
                                              a.now, c.kept_payload))
            changes, ended = claim_changes(decision.action, seen, c.on_stale, a.values, a.now)
            new = records.compare_and_set(seen, changes, cur, ended)
            if new is None:
                return AGAIN
            new = service.after_claim(cur, decision, seen, new, a.now)
            if decision.row == "expired":  # an expired record is its own trace
                late = self._late(cur, a, new, domain.trace_of(seen))
                if late is not None:
                    return late
        if decision.outcome is Outcome.ACQUIRED:
            return Claimed(Outcome.ACQUIRED, new, a.token)
        return answer(decision.outcome, new, a.now)

    def _insert_or_count(self, values: dict) -> tuple[Optional[Record], Optional[tuple]]:
        groups = self.service.groups
        if groups is None:
            return self.service.records.claim_with_trace(values)
        key = (values["tenant_id"], values["scope"], values["key"])
        return groups.submit(key, values) or (None, None)

    def _late(self, cur, a: Attempt, new: Record, trace: Optional[domain.Trace]
              ) -> Optional[Answered]:
        """A claim that acquired a key afresh as `new`: None unless it is a late repeat of
        `trace`. One is noted, counted, and by the claim's policy answered acquired (marked)
        or held for a person (LateRepeat, raised once the transaction has committed)."""
        service, c = self.service, a.claim
        if not domain.late_repeat(trace, c.fingerprint, a.now, service.late_window):
            return None
        service.traces.note(cur, new.tenant_id, new.scope, new.key, trace, c.on_late_repeat,
                            a.now)
        service.observer.late_repeat(new.scope)
        if c.on_late_repeat == domain.LatePolicy.ALLOW.value:
            return Claimed(Outcome.ACQUIRED, new, a.token, late=trace)
        held = service.records.compare_and_set(
            new, {"state": State.NEEDS_RECONCILIATION.value}, cur)
        review = service.reviews.open_or_count(cur, held, domain.ReviewKind.LATE_REPEAT, a.now,
                                               count=0)
        return Refused(LateRepeat(replace(held, review_id=held.review_id or review.id), trace))
