"""The transitions that are not a client's call, as pure functions: what a claim's decision
writes, which records the reconciler moves and the sweeper may purge, and what a person's
resolution does. The storage layer's SQL mirrors the predicates (tests/integration/
test_upkeep.py checks they agree on generated records, as test_fast_path does for claims).
"""
from __future__ import annotations

from typing import Optional

from keystore_service.domain.records import (
    FINISHED,
    Action,
    Micros,
    OnStale,
    Record,
    State,
    expired,
    lease_ran_out,
)

INCREMENT = object()  # a change meaning "this counter + 1" (the store writes it in SQL)
UNFINISHED = frozenset({State.IN_PROGRESS.value, State.NEEDS_RECONCILIATION.value})


def claim_changes(action: Action, seen: Record, on_stale: str, values: dict, now: Micros):
    """The compare-and-set changes (and the ended attempt, if any) of a claim decision.
    `values` is the row the claim would have inserted (its new lease, window and version)."""
    lease = {"state": State.IN_PROGRESS.value, "lease_token_hash": values["lease_token_hash"],
             "lease_acquired_at": now, "lease_expires_at": values["lease_expires_at"],
             "on_stale": on_stale, "last_seen_at": now}
    unfinished = seen.state in UNFINISHED
    if action is Action.NEW_INCARNATION:  # expired, or a newer version of a finished record
        fresh = {k: values[k] for k in ("fingerprint", "first_seen_at", "expires_at",
                                        "duplicate_count", "checkpoint_step",
                                        "checkpoint_resource_id", "checkpoint_at", "result",
                                        "version_kind", "version")}
        ended = {"ending": "taken_over", "ended_at": now, "reason": "expired"}
        return {**lease, **fresh, "attempt": 1, "incarnation": seen.incarnation + 1}, \
            (ended if unfinished else None)
    if action is Action.NEXT_ATTEMPT:
        ended = {"ending": "taken_over", "ended_at": now,
                 "reason": "lease ran out (on_stale retry)"}
        version = {}
        if values["version"] is not None and (seen.version is None
                                              or values["version"] > seen.version):
            version = {"version_kind": values["version_kind"], "version": values["version"]}
        return {**lease, **version, "attempt": seen.attempt + 1}, (ended if unfinished else None)
    if action is Action.MARK_NEEDS_RECONCILIATION:
        return {"state": State.NEEDS_RECONCILIATION.value, "duplicate_count": INCREMENT,
                "last_seen_at": now}, None
    return {"duplicate_count": INCREMENT, "last_seen_at": now}, None  # COUNT_REPEAT


def reconcile_due(r: Record, now: Micros) -> bool:
    """The reconciler moves an unexpired in-progress record whose lease ran out under
    `on_stale: reconcile` to needs_reconciliation. A `retry` lease is left to the next claim:
    its holder's late completion must still be accepted (issue 13, item 2)."""
    return (lease_ran_out(r, now) and r.on_stale == OnStale.RECONCILE.value
            and not expired(r, now))


def sweepable(r: Record, now: Micros, keep_finished: Micros, keep_unresolved: Micros) -> bool:
    """The sweeper purges an expired record (never one under a live lease) `keep_finished`
    after its expiry, or `keep_unresolved` after it while a review of it is open."""
    live = r.state == State.IN_PROGRESS.value and r.lease_expires_at is not None \
        and now < r.lease_expires_at
    if live or r.expires_at > now - keep_finished:
        return False
    return r.review_id is None or r.expires_at <= now - keep_unresolved


RESOLVED_STATE = {"mark_succeeded": State.SUCCEEDED.value, "mark_failed": State.FAILED.value,
                  "release": State.RELEASED.value}


class AlreadyFinished(Exception):
    """A resolution that would settle a finished record (answered 409 already_completed)."""


def resolution_changes(seen: Record, action: str, result: Optional[str],
                       resource_id: Optional[str], reason: str,
                       now: Micros) -> Optional[tuple[dict, Optional[dict]]]:
    """What a person's mark_succeeded / mark_failed / release writes: the record's changes
    (its lease token replaced: fencing) and the ended attempt; None when there is nothing to
    write (a released record released again). AlreadyFinished for a finished record."""
    if seen.state in FINISHED:
        raise AlreadyFinished()
    if action == "release" and seen.state == State.RELEASED.value:
        return None
    changes: dict = {"state": RESOLVED_STATE[action], "lease_expires_at": None,
                     "lease_token_hash": None}
    if action != "release":
        changes.update(result=result or "{}", result_resource_id=resource_id)
    ended = {"ending": "resolved", "ended_at": now, "reason": reason} \
        if seen.state in UNFINISHED else None
    return changes, ended
