"""Batch claims for polling overlap: up to 1,000 items of one scope in one transaction.

Each item gets the outcome it would have had if the items were claimed one by one in order.
Round trips, whatever the batch size: one multi-row insert-or-nothing of every new key, one
read (locked, in key order) of the keys that were there already, one update of all repeat
counters; only items that take over an existing record (released, stale under `retry`,
expired, or a newer version) add a compare-and-set each.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Optional

from keystore_service import errors
from keystore_service.domain import records as domain
from keystore_service.domain.records import Action, Outcome, Record, State
from keystore_service.domain.upkeep import claim_changes
from keystore_service.service.claims import ANSWER_RESULTS_BYTES, KeyStoreService
from keystore_service.service.fencing import proposed_or_new
from keystore_service.service.outcomes import refusal
from keystore_service.storage.records import new_record_values


@dataclass(frozen=True, slots=True)
class Item:
    key: str
    fingerprint: Optional[str]
    version_kind: Optional[str]
    version: Optional[int]
    lease_token: Optional[str] = None  # proposed by the client (v1.1)


@dataclass(frozen=True, slots=True)
class ItemResult:
    outcome: Optional[Outcome]  # None when the item was refused as invalid
    record: Optional[Record]
    lease_token: Optional[str] = None
    error: Optional[errors.KeystoreError] = None
    resumed: bool = False


class BatchClaims:
    def __init__(self, service: KeyStoreService):
        self.service = service
        self.records = service.records
        self.clock = service.clock

    def claim(self, tenant_id: int, scope: str, items: list[Item], ttl_seconds: int,
              lease_seconds: int, on_stale: str) -> list[ItemResult]:
        now = self.clock()
        tokens: dict = {}  # the first item's of each key, kept across repeats of the batch
        for item in items:
            if item.key not in tokens:
                tokens[item.key] = proposed_or_new(item.lease_token)
        return self.service.through_outages(lambda: self._claim(  # (through an outage)
            tenant_id, scope, items, ttl_seconds, lease_seconds, on_stale, now, tokens))

    def _claim(self, tenant_id: int, scope: str, items: list[Item], ttl_seconds: int,
               lease_seconds: int, on_stale: str, now: int, tokens: dict) -> list[ItemResult]:
        lease_until = now + lease_seconds * domain.SECOND
        expires_at = now + ttl_seconds * domain.SECOND
        firsts: dict[str, Item] = {}
        for item in items:
            firsts.setdefault(item.key, item)
        shared = {"tenant_id": tenant_id, "scope": scope, "now": now, "lease_until": lease_until,
                  "expires_at": expires_at, "on_stale": on_stale}
        rows = [(k, it.fingerprint, tokens[k][1], it.version_kind, it.version)
                for k, it in sorted(firsts.items())]
        batch = self.records.batch
        with self.records.transaction() as cur:
            view = {row[3]: Record(*row) for row in batch.insert(cur, shared, rows)}
            inserted = set(view)
            missing = [k for k in firsts if k not in view]
            if missing:
                view.update((row[3], Record(*row))
                            for row in batch.losers(cur, tenant_id, scope, missing))
            pending: dict[int, int] = defaultdict(int)
            results = []
            for item in items:
                if item.key in inserted and firsts[item.key] is item:
                    results.append(ItemResult(Outcome.ACQUIRED, view[item.key],
                                              tokens[item.key][0]))
                    continue
                results.append(self._one(cur, item, view, pending, shared, now, firsts,
                                         tokens))
            _within_budget(results)  # before the commit: a refused batch writes nothing
            batch.add_counts(cur, pending, now)
        return results

    def _one(self, cur, item: Item, view: dict, pending: dict, shared: dict, now: int,
             firsts: dict, tokens: dict) -> ItemResult:
        seen = view.get(item.key)
        if seen is None:  # purged between the insert and the read: nothing is committed
            raise errors.Unavailable("a record changed under the batch; send it again")
        first = firsts.get(item.key) is item
        token, token_hash = tokens[item.key] if first else proposed_or_new(item.lease_token)
        # Only a key's first item may resume: a later item of the same key is a repeat
        # within the batch ("a key twice: the first acquires"), whatever token it proposes.
        query = domain.ClaimRequest(item.fingerprint, item.version_kind, item.version,
                                    token_hash if first else None)
        decision = domain.decide_claim(seen, query, now)
        if decision.action is Action.RESUME:  # the claimant's own attempt, found again
            return ItemResult(Outcome.ACQUIRED, seen, token, resumed=True)
        if decision.action is Action.COUNT_REPEAT:
            pending[seen.id] += 1
            counted = replace(seen, duplicate_count=seen.duplicate_count + 1, last_seen_at=now)
            if seen.state == State.NEEDS_RECONCILIATION.value:  # counts on its review too
                review = self.service.reviews.open_or_count(
                    cur, seen, domain.ReviewKind.STALE_LEASE, now)
                counted = replace(counted, review_id=seen.review_id or review.id)
            view[item.key] = counted
            return _answered(decision.outcome, counted, now)
        if decision.action is Action.NOTHING:
            error = self.service.refuse(cur, decision.outcome, seen, item.fingerprint, now)
            view[item.key] = error.record
            shown = None if decision.outcome is Outcome.VERSION_KIND_CONFLICT else \
                decision.outcome
            return ItemResult(shown, error.record, error=error)
        if pending.get(seen.id):  # the compare-and-set below returns the true counters
            self.records.batch.add_counts(cur, {seen.id: pending.pop(seen.id)}, now)
        values = new_record_values(
            shared["tenant_id"], shared["scope"], item.key, item.fingerprint, token_hash, now,
            shared["lease_until"], shared["expires_at"], shared["on_stale"], item.version_kind,
            item.version)
        changes, ended = claim_changes(decision.action, seen, shared["on_stale"], values, now)
        new = self.records.compare_and_set(seen, changes, cur, ended)
        if new is None:  # the rows are locked (FOR UPDATE, or SQLite's write lock)
            raise errors.Unavailable("a record changed under the batch; send it again")
        new = self.service.after_claim(cur, decision, seen, new, now)
        view[item.key] = new
        if decision.outcome is Outcome.ACQUIRED:
            return ItemResult(Outcome.ACQUIRED, new, token)
        return _answered(decision.outcome, new, now)


def _within_budget(results: list[ItemResult]) -> None:
    """PayloadTooLarge (and so a rollback) when the answer would carry more stored results
    than one answer may: the caller sends fewer items per batch (nothing was written)."""
    size = sum(len(r.record.result) for r in results
               if r.record is not None and r.record.result is not None)
    if size > ANSWER_RESULTS_BYTES:
        raise errors.PayloadTooLarge(
            "the answer would carry more stored results than one answer may; nothing was "
            "written: send fewer items per batch (or name each key once)",
            details={"reason": "answer_too_large", "limit_bytes": ANSWER_RESULTS_BYTES})


def _answered(outcome: Outcome, record: Record, now: int) -> ItemResult:
    if outcome is Outcome.REPLAY:
        return ItemResult(Outcome.REPLAY, record)
    error = refusal(outcome, record, now)
    shown = None if outcome is Outcome.VERSION_KIND_CONFLICT else outcome
    return ItemResult(shown, record, error=error)
