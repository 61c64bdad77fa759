"""The key store's rules, as data and pure functions.

Nothing here reads a clock, a database or a request: every function takes the record as it is
stored and `now`, and says what docs/api.md requires. Instants are integers of microseconds
since the Unix epoch, UTC; that makes "exactly at the expiry instant" an exact comparison on
every backend. The storage layer turns each decision into one compare-and-set write.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Optional

Micros = int  # microseconds since 1970-01-01T00:00:00Z
SECOND: Micros = 1_000_000


class State(StrEnum):
    IN_PROGRESS = "in_progress"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RELEASED = "released"
    NEEDS_RECONCILIATION = "needs_reconciliation"


FINISHED = frozenset({State.SUCCEEDED.value, State.FAILED.value})
MAX_RESULT_BYTES = 256 * 1024  # docs/api.md's limit on a result body, in canonical form


HOOK_SCOPE_PREFIX = "hook:"  # the gateway's scopes: its events' records (contract v1.1)


def is_hook_scope(scope: str) -> bool:
    """Scopes beginning with `hook:` are reserved for the gateway."""
    return scope.startswith(HOOK_SCOPE_PREFIX)


class ReviewKind(StrEnum):
    """What a review item is about (one open review per record and kind)."""

    FINGERPRINT_MISMATCH = "fingerprint_mismatch"  # same key, other payload: refused
    STALE_LEASE = "stale_lease"  # a lease ran out with an unknown outcome
    DELIVERY_FAILED = "delivery_failed"  # the gateway gave up forwarding an event
    LATE_REPEAT = "late_repeat"  # an expired key came back with its old fingerprint
    SEND_UNKNOWN = "send_unknown"  # a send's outcome is unknown and no check settled it


class OnStale(StrEnum):
    RECONCILE = "reconcile"
    RETRY = "retry"


@dataclass(frozen=True, slots=True)
class Record:
    """One stored record (times in Micros). Field order is the table's column order."""

    id: int
    tenant_id: int
    scope: str
    key: str
    state: str
    fingerprint: Optional[str]
    attempt: int
    incarnation: int
    lease_token_hash: Optional[str]
    lease_acquired_at: Optional[Micros]
    lease_expires_at: Optional[Micros]
    on_stale: str
    first_seen_at: Micros
    last_seen_at: Micros
    expires_at: Micros
    duplicate_count: int
    checkpoint_step: Optional[str]
    checkpoint_resource_id: Optional[str]
    checkpoint_at: Optional[Micros]
    result: Optional[str]  # canonical JSON of the stored result, once finished
    version_kind: Optional[str] = None  # "int" or "time" (one kind per record)
    version: Optional[int] = None  # an integer, or a UTC instant in microseconds
    review_id: Optional[int] = None  # the oldest open review of this record, if any
    result_resource_id: Optional[str] = None


def lease_live(r: Record, now: Micros) -> bool:
    """An in-progress record holds its lease until the instant `lease_expires_at`."""
    return (r.state == State.IN_PROGRESS.value and r.lease_expires_at is not None
            and now < r.lease_expires_at)


def lease_ran_out(r: Record, now: Micros) -> bool:
    return r.state == State.IN_PROGRESS.value and not lease_live(r, now)


def expired(r: Record, now: Micros) -> bool:
    """Expired from the instant `expires_at` on, but never while a lease is live."""
    return now >= r.expires_at and not lease_live(r, now)


def fingerprints_differ(stored: Optional[str], given: Optional[str]) -> bool:
    """A mismatch needs a fingerprint on both sides; a missing one matches anything."""
    return stored is not None and given is not None and stored != given


def retry_after_seconds(r: Record, now: Micros) -> int:
    """Whole seconds until the lease runs out, rounded up, at least 1."""
    left = (r.lease_expires_at or now) - now
    return max(1, -(-left // SECOND))


# --- claim ------------------------------------------------------------------------------


class Outcome(StrEnum):
    ACQUIRED = "acquired"
    REPLAY = "replay"
    IN_PROGRESS = "in_progress"
    NEEDS_RECONCILIATION = "needs_reconciliation"
    FINGERPRINT_MISMATCH = "fingerprint_mismatch"
    VERSION_KIND_CONFLICT = "version_kind_conflict"  # answered 400 invalid_request


class Action(StrEnum):
    """What the store must write for a claim decision."""

    INSERT = "insert"  # no row at all: insert-or-nothing
    NEW_INCARNATION = "new_incarnation"  # expired row: start again at attempt 1
    NEXT_ATTEMPT = "next_attempt"  # released or stale under `retry`: attempt + 1
    COUNT_REPEAT = "count_repeat"  # duplicate_count + 1, last_seen_at = now
    MARK_NEEDS_RECONCILIATION = "mark_needs_reconciliation"  # + count the repeat
    RESUME = "resume"  # the holder's own claim again (its answer was lost): write nothing
    NOTHING = "nothing"  # a refused claim leaves the record untouched


@dataclass(frozen=True, slots=True)
class ClaimDecision:
    outcome: Outcome
    action: Action
    row: str  # which row of docs/api.md's table decided, for tests and logs


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    fingerprint: Optional[str]
    version_kind: Optional[str] = None
    version: Optional[int] = None
    token_hash: Optional[str] = None  # the hash of the lease token the claim proposes


def versions_compare(r: Record, q: ClaimRequest) -> Optional[int]:
    """-1, 0 or 1 for a claim's version older, equal or newer than the record's; None when
    either side has none (versions then play no part)."""
    if r.version is None or q.version is None:
        return None
    return (q.version > r.version) - (q.version < r.version)


# Upsert-if-newer, for a finished record when both sides carry a version of one kind.
VERSION_TABLE: tuple[tuple[str, Callable[[Record, ClaimRequest], bool], Outcome, Action], ...] = (
    ("newer version", lambda r, q: versions_compare(r, q) == 1,
     Outcome.ACQUIRED, Action.NEW_INCARNATION),
    ("equal version, different fingerprint",
     lambda r, q: versions_compare(r, q) == 0 and fingerprints_differ(r.fingerprint, q.fingerprint),
     Outcome.FINGERPRINT_MISMATCH, Action.NOTHING),
    ("equal or older version", lambda r, q: True, Outcome.REPLAY, Action.COUNT_REPEAT),
)


_Rule = Callable[[Record, ClaimRequest, Micros], bool]

def newer_version(r: Record, q: ClaimRequest) -> bool:
    """The claim carries a newer version than the record: a new intent (contract v1.1,
    "a newer version is never a mismatch"), not a repeat to compare by fingerprint."""
    return versions_compare(r, q) == 1


# docs/api.md's claim table, in its order. An expired record is treated as absent first,
# and a finished record with versions on both sides goes by VERSION_TABLE.
CLAIM_TABLE: tuple[tuple[str, _Rule, Outcome, Action], ...] = (
    ("different fingerprint",
     lambda r, q, now: fingerprints_differ(r.fingerprint, q.fingerprint)
     and not newer_version(r, q),
     Outcome.FINGERPRINT_MISMATCH, Action.NOTHING),
    # v1.1: a claim that proposes the token its own earlier claim acquired with (that
    # claim's answer was lost in flight) carries on with that attempt, live or stale.
    ("in progress, the claimant's own attempt", lambda r, q, now: r.state == State.IN_PROGRESS
     .value and q.token_hash is not None and q.token_hash == r.lease_token_hash,
     Outcome.ACQUIRED, Action.RESUME),
    ("released, newer version", lambda r, q, now: r.state == State.RELEASED.value
     and newer_version(r, q), Outcome.ACQUIRED, Action.NEW_INCARNATION),
    ("released", lambda r, q, now: r.state == State.RELEASED.value,
     Outcome.ACQUIRED, Action.NEXT_ATTEMPT),
    ("finished", lambda r, q, now: r.state in FINISHED,
     Outcome.REPLAY, Action.COUNT_REPEAT),
    ("in progress, lease live", lambda r, q, now: lease_live(r, now),
     Outcome.IN_PROGRESS, Action.COUNT_REPEAT),
    ("in progress, lease ran out, on_stale retry",
     lambda r, q, now: lease_ran_out(r, now) and r.on_stale == OnStale.RETRY.value,
     Outcome.ACQUIRED, Action.NEXT_ATTEMPT),
    ("in progress, lease ran out, on_stale reconcile",
     lambda r, q, now: lease_ran_out(r, now),
     Outcome.NEEDS_RECONCILIATION, Action.MARK_NEEDS_RECONCILIATION),
    ("needs reconciliation", lambda r, q, now: r.state == State.NEEDS_RECONCILIATION.value,
     Outcome.NEEDS_RECONCILIATION, Action.COUNT_REPEAT),
)


def decide_claim(r: Optional[Record], q: ClaimRequest, now: Micros) -> ClaimDecision:
    """Which row of docs/api.md's claim table applies to a claim at `now`."""
    if r is None:
        return ClaimDecision(Outcome.ACQUIRED, Action.INSERT, "no record")
    if expired(r, now):
        return ClaimDecision(Outcome.ACQUIRED, Action.NEW_INCARNATION, "expired")
    if q.version_kind and r.version_kind and q.version_kind != r.version_kind:
        return ClaimDecision(Outcome.VERSION_KIND_CONFLICT, Action.NOTHING, "other version kind")
    if r.state in FINISHED and versions_compare(r, q) is not None:
        for name, applies_v, outcome, action in VERSION_TABLE:
            if applies_v(r, q):
                return ClaimDecision(outcome, action, name)
    for name, applies, outcome, action in CLAIM_TABLE:
        if applies(r, q, now):
            return ClaimDecision(outcome, action, name)
    raise AssertionError(f"no claim rule for state {r.state!r}")  # states are a closed set


# --- complete, release, extend, expire --------------------------------------------------


class Verdict(StrEnum):
    """The answer to an operation on an existing attempt."""

    APPLY = "apply"  # write the change (compare-and-set)
    ALREADY_DONE = "already_done"  # the same request again: answer 200, write nothing
    NOT_FOUND = "not_found"
    EXPIRED = "expired"
    LEASE_LOST = "lease_lost"
    ALREADY_COMPLETED = "already_completed"
    IN_PROGRESS = "in_progress"


def _holder_check(r: Optional[Record], token_hash: str, now: Micros) -> Optional[Verdict]:
    if r is None:
        return Verdict.NOT_FOUND
    if expired(r, now):
        return Verdict.EXPIRED
    if r.lease_token_hash != token_hash:
        return Verdict.LEASE_LOST  # a newer attempt or a person's resolution replaced it
    return None


def decide_complete(r: Optional[Record], token_hash: str, state: str, result: Optional[str],
                    now: Micros) -> Verdict:
    """Complete the current attempt with `state` (succeeded | failed) and a canonical result."""
    early = _holder_check(r, token_hash, now)
    if early is not None:
        return early
    assert r is not None
    if r.state in FINISHED:
        same = r.state == state and r.result == result
        return Verdict.ALREADY_DONE if same else Verdict.ALREADY_COMPLETED
    if r.state == State.RELEASED.value:
        return Verdict.LEASE_LOST  # the holder gave its lease back
    return Verdict.APPLY  # in progress (live or stale) or needs reconciliation


def decide_release(r: Optional[Record], token_hash: str, now: Micros) -> Verdict:
    early = _holder_check(r, token_hash, now)
    if early is not None:
        return early
    assert r is not None
    if r.state in FINISHED:
        return Verdict.ALREADY_COMPLETED
    if r.state == State.RELEASED.value:
        return Verdict.ALREADY_DONE
    return Verdict.APPLY


def decide_extend(r: Optional[Record], token_hash: str, now: Micros) -> Verdict:
    early = _holder_check(r, token_hash, now)
    if early is not None:
        return early
    assert r is not None
    if r.state in FINISHED:
        return Verdict.ALREADY_COMPLETED
    if r.state == State.RELEASED.value:
        return Verdict.LEASE_LOST
    return Verdict.APPLY  # also revives a stale lease or a needs_reconciliation record


def decide_expire(r: Optional[Record], now: Micros) -> Verdict:
    """An operator ends the retention window now, unless an attempt is running."""
    if r is None:
        return Verdict.NOT_FOUND
    if expired(r, now):
        return Verdict.ALREADY_DONE
    if lease_live(r, now):
        return Verdict.IN_PROGRESS
    return Verdict.APPLY


# --- late repeats (contract v1.1) -------------------------------------------------------


class LatePolicy(StrEnum):
    ALLOW = "allow"  # acquired as usual, marked as a late repeat
    REVIEW = "review"  # 409 needs_reconciliation with a late_repeat review


@dataclass(frozen=True, slots=True)
class Trace:
    """What is kept of a finished record once it expired (never its result body)."""

    fingerprint: str
    resource_id: Optional[str]
    first_seen_at: Micros
    expired_at: Micros


def trace_of(r: Record) -> Optional[Trace]:
    """The trace a finished record with a fingerprint leaves when it expires."""
    if r.state not in FINISHED or r.fingerprint is None:
        return None
    return Trace(r.fingerprint, r.result_resource_id, r.first_seen_at, r.expires_at)


def late_repeat(trace: Optional[Trace], fingerprint: Optional[str], now: Micros,
                window: Micros) -> bool:
    """A claim that acquires a key afresh is a late repeat when the key's trace has the
    same fingerprint and the trace's own window (from the expiry on) has not run out: most
    likely the old event sent again after the retention window, not a re-issue. A different
    fingerprint after expiry is a legitimate re-issue."""
    return (trace is not None and window > 0 and fingerprint is not None
            and trace.fingerprint == fingerprint and now < trace.expired_at + window)
