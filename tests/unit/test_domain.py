"""The pure rules: every row of docs/api.md's claim table, in its order, and the holder's
calls, with `now` given exactly (expiry is tested at the instant itself)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from keystore_service.domain import records as domain
from keystore_service.domain.records import Action, Outcome, Verdict
from tests.support import SECOND, T0

from .support import H, rec

OTHER = "b" * 64


def claim(r, fp="fp1", now=T0 + SECOND):
    return domain.decide_claim(r, domain.ClaimRequest(fp), now)


# --- the claim table, row by row ------------------------------------------------------------

def test_no_record_is_acquired_by_insert():
    d = claim(None)
    assert (d.outcome, d.action) == (Outcome.ACQUIRED, Action.INSERT)


@pytest.mark.parametrize("state", ["in_progress", "succeeded", "failed", "released",
                                   "needs_reconciliation"])
def test_a_different_fingerprint_is_refused_in_every_state(state):
    d = claim(rec(state=state, result="{}" if state in ("succeeded", "failed") else None),
              fp="fp2")
    assert (d.outcome, d.action) == (Outcome.FINGERPRINT_MISMATCH, Action.NOTHING)


@pytest.mark.parametrize("stored,given", [(None, "fp2"), ("fp1", None), (None, None)])
def test_a_missing_fingerprint_on_either_side_matches(stored, given):
    d = claim(rec(state="succeeded", fingerprint=stored, result="{}"), fp=given)
    assert d.outcome is Outcome.REPLAY


def test_released_is_acquired_with_the_next_attempt():
    d = claim(rec(state="released", lease_expires_at=None))
    assert (d.outcome, d.action) == (Outcome.ACQUIRED, Action.NEXT_ATTEMPT)


def test_mismatch_comes_before_released():
    d = claim(rec(state="released", lease_expires_at=None), fp="fp2")
    assert d.outcome is Outcome.FINGERPRINT_MISMATCH


@pytest.mark.parametrize("state", ["succeeded", "failed"])
def test_finished_is_replayed_and_counted(state):
    d = claim(rec(state=state, lease_expires_at=None, result="{}"))
    assert (d.outcome, d.action) == (Outcome.REPLAY, Action.COUNT_REPEAT)


def test_in_progress_with_a_live_lease_says_in_progress():
    r = rec()
    d = claim(r, now=r.lease_expires_at - 1)
    assert (d.outcome, d.action) == (Outcome.IN_PROGRESS, Action.COUNT_REPEAT)


def test_a_lease_runs_out_at_its_instant_under_retry():
    r = rec(on_stale="retry")
    assert claim(r, now=r.lease_expires_at - 1).outcome is Outcome.IN_PROGRESS
    d = claim(r, now=r.lease_expires_at)
    assert (d.outcome, d.action) == (Outcome.ACQUIRED, Action.NEXT_ATTEMPT)


def test_a_lease_runs_out_at_its_instant_under_reconcile():
    r = rec(on_stale="reconcile")
    d = claim(r, now=r.lease_expires_at)
    assert (d.outcome, d.action) == (Outcome.NEEDS_RECONCILIATION,
                                     Action.MARK_NEEDS_RECONCILIATION)


def test_needs_reconciliation_stays_until_a_person_or_the_holder_acts():
    d = claim(rec(state="needs_reconciliation"))
    assert (d.outcome, d.action) == (Outcome.NEEDS_RECONCILIATION, Action.COUNT_REPEAT)


# --- expiry: exactly at the instant ---------------------------------------------------------

@pytest.mark.parametrize("state", ["succeeded", "failed", "released", "needs_reconciliation"])
def test_expiry_is_exact_to_the_microsecond(state):
    r = rec(state=state, lease_expires_at=None, result="{}")
    assert not domain.expired(r, r.expires_at - 1)
    assert domain.expired(r, r.expires_at)
    assert claim(r, fp="other", now=r.expires_at - 1).outcome is Outcome.FINGERPRINT_MISMATCH
    d = claim(r, fp="other", now=r.expires_at)
    assert (d.outcome, d.action) == (Outcome.ACQUIRED, Action.NEW_INCARNATION)


def test_a_live_lease_keeps_a_record_past_its_expiry():
    r = rec(expires_at=T0 + 10 * SECOND, lease_expires_at=T0 + 20 * SECOND)
    assert not domain.expired(r, T0 + 15 * SECOND)
    assert claim(r, now=T0 + 15 * SECOND).outcome is Outcome.IN_PROGRESS
    assert domain.expired(r, T0 + 20 * SECOND)
    assert claim(r, now=T0 + 20 * SECOND).action is Action.NEW_INCARNATION


def test_retry_after_is_whole_seconds_rounded_up_and_at_least_one():
    r = rec(lease_expires_at=T0 + 10 * SECOND)
    assert domain.retry_after_seconds(r, T0) == 10
    assert domain.retry_after_seconds(r, T0 + 1) == 10
    assert domain.retry_after_seconds(r, T0 + 10 * SECOND - 1) == 1


# --- complete, release, extend, expire ------------------------------------------------------

def test_complete_verdicts():
    live = rec()
    now = T0 + SECOND
    assert domain.decide_complete(None, H, "succeeded", "{}", now) is Verdict.NOT_FOUND
    assert domain.decide_complete(live, OTHER, "succeeded", "{}", now) is Verdict.LEASE_LOST
    assert domain.decide_complete(live, H, "succeeded", "{}", now) is Verdict.APPLY
    stale = rec(lease_expires_at=T0)
    assert domain.decide_complete(stale, H, "failed", "{}", now) is Verdict.APPLY
    needs = rec(state="needs_reconciliation")
    assert domain.decide_complete(needs, H, "succeeded", "{}", now) is Verdict.APPLY
    done = rec(state="succeeded", lease_expires_at=None, result='{"a":1}')
    assert domain.decide_complete(done, H, "succeeded", '{"a":1}', now) is Verdict.ALREADY_DONE
    assert domain.decide_complete(done, H, "succeeded", '{"a":2}', now) \
        is Verdict.ALREADY_COMPLETED
    assert domain.decide_complete(done, H, "failed", '{"a":1}', now) is Verdict.ALREADY_COMPLETED
    assert domain.decide_complete(done, OTHER, "succeeded", '{"a":1}', now) is Verdict.LEASE_LOST
    released = rec(state="released", lease_expires_at=None)
    assert domain.decide_complete(released, H, "succeeded", "{}", now) is Verdict.LEASE_LOST
    expired = rec(state="succeeded", lease_expires_at=None, result="{}")
    assert domain.decide_complete(expired, H, "succeeded", "{}", expired.expires_at) \
        is Verdict.EXPIRED


def test_release_verdicts():
    now = T0 + SECOND
    assert domain.decide_release(None, H, now) is Verdict.NOT_FOUND
    assert domain.decide_release(rec(), H, now) is Verdict.APPLY
    assert domain.decide_release(rec(), OTHER, now) is Verdict.LEASE_LOST
    assert domain.decide_release(rec(state="needs_reconciliation"), H, now) is Verdict.APPLY
    assert domain.decide_release(rec(state="released"), H, now) is Verdict.ALREADY_DONE
    assert domain.decide_release(rec(state="failed", result="{}"), H, now) \
        is Verdict.ALREADY_COMPLETED
    r = rec(state="released")
    assert domain.decide_release(r, H, r.expires_at) is Verdict.EXPIRED


def test_extend_verdicts():
    now = T0 + SECOND
    assert domain.decide_extend(None, H, now) is Verdict.NOT_FOUND
    assert domain.decide_extend(rec(), H, now) is Verdict.APPLY
    assert domain.decide_extend(rec(lease_expires_at=T0), H, now) is Verdict.APPLY  # revive
    assert domain.decide_extend(rec(state="needs_reconciliation"), H, now) is Verdict.APPLY
    assert domain.decide_extend(rec(), OTHER, now) is Verdict.LEASE_LOST
    assert domain.decide_extend(rec(state="released"), H, now) is Verdict.LEASE_LOST
    assert domain.decide_extend(rec(state="succeeded", result="{}"), H, now) \
        is Verdict.ALREADY_COMPLETED


def test_expire_verdicts():
    r = rec()
    assert domain.decide_expire(None, T0) is Verdict.NOT_FOUND
    assert domain.decide_expire(r, r.lease_expires_at - 1) is Verdict.IN_PROGRESS
    assert domain.decide_expire(r, r.lease_expires_at) is Verdict.APPLY  # stale: may expire
    done = replace(r, state="succeeded", lease_expires_at=None, result="{}")
    assert domain.decide_expire(done, T0) is Verdict.APPLY
    assert domain.decide_expire(done, done.expires_at) is Verdict.ALREADY_DONE


# (state, lease live at the claim, on_stale) -> the row of the claim table that decides
EXPECTED_ROWS = {
    ("in_progress", True, "retry"): ("in progress, lease live", Outcome.IN_PROGRESS),
    ("in_progress", True, "reconcile"): ("in progress, lease live", Outcome.IN_PROGRESS),
    ("in_progress", False, "retry"): ("in progress, lease ran out, on_stale retry",
                                      Outcome.ACQUIRED),
    ("in_progress", False, "reconcile"): ("in progress, lease ran out, on_stale reconcile",
                                          Outcome.NEEDS_RECONCILIATION),
    **{(state, live, on_stale): (row, outcome)
       for state, row, outcome in (("succeeded", "finished", Outcome.REPLAY),
                                   ("failed", "finished", Outcome.REPLAY),
                                   ("released", "released", Outcome.ACQUIRED),
                                   ("needs_reconciliation", "needs reconciliation",
                                    Outcome.NEEDS_RECONCILIATION))
       for live in (True, False) for on_stale in ("retry", "reconcile")},
}


@pytest.mark.parametrize("state,live,on_stale", sorted(EXPECTED_ROWS))
def test_the_claim_table_covers_every_state(state, live, on_stale):
    lease = T0 + 600 * SECOND if live else T0  # the claim is made at T0 + 1 s
    d = claim(rec(state=state, lease_expires_at=lease, on_stale=on_stale))
    assert (d.row, d.outcome) == EXPECTED_ROWS[(state, live, on_stale)]


def test_the_review_kinds_are_one_list_everywhere():
    from typing import get_args

    from keystore_service.storage import tables
    from keystore_service.web.api import schemas
    kinds = {k.value for k in domain.ReviewKind}
    assert set(get_args(schemas.ReviewKindName)) == kinds
    assert all(f"'{k}'" in tables.REVIEW_KINDS for k in kinds)
