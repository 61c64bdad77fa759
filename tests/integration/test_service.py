"""Every row of docs/api.md's claim, complete, release, extend, lookup and expire sections,
through the service and a real database (SQLite and PostgreSQL), on a test clock."""
from __future__ import annotations

from dataclasses import replace

import pytest

from keystore_service import errors
from keystore_service.domain.records import Outcome
from keystore_service.service.claims import Claim
from tests.support import SECOND

TTL, LEASE = 3600, 60


def claim(ks, tenant_id, key="k", fp="fp1", on_stale="reconcile", ttl=TTL, lease=LEASE,
          scope="invoice"):
    return ks.service.claim(tenant_id, Claim(scope, key, fp, ttl, lease, on_stale))


def refused(ks, tenant_id, error, **kw):
    with pytest.raises(error) as info:
        claim(ks, tenant_id, **kw)
    return info.value


def complete(ks, tenant_id, token, key="k", state="succeeded", result='{"resource_id":"INV-1"}'):
    return ks.service.complete(tenant_id, "invoice", key, token, state, result)


# --- claim ------------------------------------------------------------------------------

def test_no_record_acquires_attempt_one(ks, tenant_id, clock):
    c = claim(ks, tenant_id)
    assert c.outcome is Outcome.ACQUIRED and c.lease_token.startswith("lt_")
    r = c.record
    assert (r.state, r.attempt, r.incarnation, r.duplicate_count) == ("in_progress", 1, 1, 0)
    assert r.first_seen_at == clock.now and r.expires_at == clock.now + TTL * SECOND
    assert r.lease_expires_at == clock.now + LEASE * SECOND
    assert r.lease_token_hash != c.lease_token  # only the hash is stored


def test_a_different_fingerprint_is_refused_and_changes_nothing(ks, tenant_id, clock):
    first = claim(ks, tenant_id)
    complete(ks, tenant_id, first.lease_token)
    before = ks.service.lookup(tenant_id, "invoice", "k")
    clock.advance(5)
    err = refused(ks, tenant_id, errors.FingerprintMismatch, fp="fp2")
    assert err.outcome == "fingerprint_mismatch" and err.record.fingerprint == "fp1"
    after = ks.service.lookup(tenant_id, "invoice", "k")
    # untouched and not counted; it only points at the review the refusal opened
    assert replace(after, review_id=None) == before and after.review_id is not None
    refused(ks, tenant_id, errors.FingerprintMismatch, fp="fp3")
    review = ks.service.open_review(after)
    assert (review.kind, review.count, review.refused) == ("fingerprint_mismatch", 2,
                                                           ["fp3", "fp2"])
    assert review.original_fingerprint == "fp1"
    assert replace(ks.service.lookup(tenant_id, "invoice", "k"), review_id=None) == before


def test_released_is_acquired_again_with_attempt_plus_one(ks, tenant_id, clock):
    first = claim(ks, tenant_id)
    ks.service.release(tenant_id, "invoice", "k", first.lease_token, "timeout upstream")
    clock.advance(1)
    second = claim(ks, tenant_id)
    assert second.outcome is Outcome.ACQUIRED and second.record.attempt == 2
    assert second.record.first_seen_at == first.record.first_seen_at  # never refreshed
    assert second.record.expires_at == first.record.expires_at
    history = ks.service.records.attempt_history(second.record.id)
    assert [(h["attempt"], h["ending"], h["reason"]) for h in history] == \
        [(1, "released", "timeout upstream")]


@pytest.mark.parametrize("state", ["succeeded", "failed"])
def test_finished_is_replayed_with_the_stored_result(ks, tenant_id, clock, state):
    first = claim(ks, tenant_id)
    complete(ks, tenant_id, first.lease_token, state=state, result='{"resource_id":"INV-9"}')
    for n in range(1, 4):
        clock.advance(10)
        again = claim(ks, tenant_id)
        assert again.outcome is Outcome.REPLAY and again.lease_token is None
        assert again.record.result == '{"resource_id":"INV-9"}' and again.record.state == state
        assert again.record.duplicate_count == n and again.record.last_seen_at == clock.now
        assert again.record.first_seen_at == first.record.first_seen_at
        assert again.record.expires_at == first.record.expires_at


def test_in_progress_with_a_live_lease_says_retry_after(ks, tenant_id, clock):
    claim(ks, tenant_id)
    clock.advance(LEASE - 0.5)
    err = refused(ks, tenant_id, errors.InProgress)
    assert err.status == 409 and err.headers["Retry-After"] == "1"
    assert err.details["retry_after_seconds"] == 1 and err.record.duplicate_count == 1


def test_a_stale_lease_under_retry_is_taken_over_at_the_instant(ks, tenant_id, clock):
    first = claim(ks, tenant_id, on_stale="retry")
    clock.advance(LEASE, micros=-1)
    refused(ks, tenant_id, errors.InProgress)
    clock.advance(micros=1)
    second = claim(ks, tenant_id)
    assert second.outcome is Outcome.ACQUIRED and second.record.attempt == 2
    history = ks.service.records.attempt_history(second.record.id)
    assert [(h["attempt"], h["ending"]) for h in history] == [(1, "taken_over")]
    with pytest.raises(errors.LeaseLost):  # fencing: the first holder is out
        complete(ks, tenant_id, first.lease_token)
    complete(ks, tenant_id, second.lease_token)


def test_a_stale_lease_under_reconcile_goes_to_reconciliation(ks, tenant_id, clock):
    first = claim(ks, tenant_id, on_stale="reconcile")
    clock.advance(LEASE)
    err = refused(ks, tenant_id, errors.NeedsReconciliation)
    assert err.record.state == "needs_reconciliation" and err.record.duplicate_count == 1
    err = refused(ks, tenant_id, errors.NeedsReconciliation)  # and stays there
    assert err.record.duplicate_count == 2
    # the holder may still settle it late with its own token
    done = complete(ks, tenant_id, first.lease_token)
    assert done.state == "succeeded"


def test_the_holders_on_stale_governs_not_the_later_claim(ks, tenant_id, clock):
    claim(ks, tenant_id, on_stale="reconcile")
    clock.advance(LEASE)
    refused(ks, tenant_id, errors.NeedsReconciliation, on_stale="retry")


def test_an_expired_record_is_a_new_incarnation(ks, tenant_id, clock):
    first = claim(ks, tenant_id, ttl=100)
    complete(ks, tenant_id, first.lease_token)
    clock.advance(100, micros=-1)
    assert claim(ks, tenant_id, fp="fp1").outcome is Outcome.REPLAY
    refused(ks, tenant_id, errors.FingerprintMismatch, fp="fp2")
    clock.advance(micros=1)
    again = claim(ks, tenant_id, fp="fp2", ttl=200)
    r = again.record
    assert again.outcome is Outcome.ACQUIRED
    assert (r.attempt, r.incarnation, r.fingerprint, r.duplicate_count, r.result) == \
        (1, 2, "fp2", 0, None)
    assert r.first_seen_at == clock.now and r.expires_at == clock.now + 200 * SECOND


def test_an_unfinished_expired_attempt_is_recorded_as_taken_over(ks, tenant_id, clock):
    claim(ks, tenant_id, ttl=10, lease=5)
    clock.advance(10)
    again = claim(ks, tenant_id)
    history = ks.service.records.attempt_history(again.record.id)
    assert [(h["incarnation"], h["ending"], h["reason"]) for h in history] == \
        [(1, "taken_over", "expired")]


def test_a_live_lease_holds_the_record_past_its_expiry(ks, tenant_id, clock):
    claim(ks, tenant_id, ttl=10, lease=60)
    clock.advance(30)
    refused(ks, tenant_id, errors.InProgress)
    assert ks.service.lookup(tenant_id, "invoice", "k").state == "in_progress"


# --- complete -----------------------------------------------------------------------------

def test_complete_is_idempotent_with_the_same_state_and_result(ks, tenant_id):
    c = claim(ks, tenant_id)
    a = complete(ks, tenant_id, c.lease_token)
    b = complete(ks, tenant_id, c.lease_token)
    assert a == b and a.state == "succeeded" and a.lease_expires_at is None
    with pytest.raises(errors.AlreadyCompleted):
        complete(ks, tenant_id, c.lease_token, result='{"resource_id":"INV-2"}')
    with pytest.raises(errors.AlreadyCompleted):
        complete(ks, tenant_id, c.lease_token, state="failed")
    history = ks.service.records.attempt_history(a.id)
    assert [(h["attempt"], h["ending"]) for h in history] == [(1, "succeeded")]


def test_complete_refusals(ks, tenant_id, clock):
    with pytest.raises(errors.NotFound):
        complete(ks, tenant_id, "lt_nothing")
    c = claim(ks, tenant_id, ttl=100)
    with pytest.raises(errors.LeaseLost):
        complete(ks, tenant_id, "lt_not-the-token")
    complete(ks, tenant_id, c.lease_token)
    clock.advance(100)
    with pytest.raises(errors.Expired):
        complete(ks, tenant_id, c.lease_token)


def test_a_late_completion_settles_a_stale_lease(ks, tenant_id, clock):
    c = claim(ks, tenant_id)
    clock.advance(LEASE * 2)
    assert complete(ks, tenant_id, c.lease_token).state == "succeeded"


def test_complete_after_release_is_refused(ks, tenant_id):
    c = claim(ks, tenant_id)
    ks.service.release(tenant_id, "invoice", "k", c.lease_token, None)
    with pytest.raises(errors.LeaseLost):
        complete(ks, tenant_id, c.lease_token)


# --- release ------------------------------------------------------------------------------

def test_release_rows(ks, tenant_id, clock):
    c = claim(ks, tenant_id)
    r = ks.service.release(tenant_id, "invoice", "k", c.lease_token, "rate limited")
    assert r.state == "released" and r.lease_expires_at is None
    assert ks.service.release(tenant_id, "invoice", "k", c.lease_token, None) == r  # again: 200
    with pytest.raises(errors.LeaseLost):
        ks.service.release(tenant_id, "invoice", "k", "lt_other", None)
    second = claim(ks, tenant_id)
    with pytest.raises(errors.LeaseLost):  # replaced by the newer attempt
        ks.service.release(tenant_id, "invoice", "k", c.lease_token, None)
    complete(ks, tenant_id, second.lease_token)
    with pytest.raises(errors.AlreadyCompleted):
        ks.service.release(tenant_id, "invoice", "k", second.lease_token, None)
    with pytest.raises(errors.NotFound):
        ks.service.release(tenant_id, "invoice", "missing", c.lease_token, None)


def test_release_from_needs_reconciliation(ks, tenant_id, clock):
    c = claim(ks, tenant_id)
    clock.advance(LEASE)
    refused(ks, tenant_id, errors.NeedsReconciliation)
    r = ks.service.release(tenant_id, "invoice", "k", c.lease_token, "gave up")
    assert r.state == "released"
    assert claim(ks, tenant_id).record.attempt == 2


# --- extend -------------------------------------------------------------------------------

def test_extend_moves_the_lease_and_records_a_checkpoint(ks, tenant_id, clock):
    c = claim(ks, tenant_id)
    clock.advance(30)
    r = ks.service.extend(tenant_id, "invoice", "k", c.lease_token, 120, "invoice_created",
                          "INV-42")
    assert r.lease_expires_at == clock.now + 120 * SECOND
    assert (r.checkpoint_step, r.checkpoint_resource_id, r.checkpoint_at) == \
        ("invoice_created", "INV-42", clock.now)
    assert r.first_seen_at == c.record.first_seen_at and r.expires_at == c.record.expires_at


def test_extend_revives_a_stale_lease_nobody_replaced(ks, tenant_id, clock):
    c = claim(ks, tenant_id)
    clock.advance(LEASE + 10)
    r = ks.service.extend(tenant_id, "invoice", "k", c.lease_token, 60, None, None)
    assert r.state == "in_progress" and r.lease_expires_at == clock.now + 60 * SECOND
    refused(ks, tenant_id, errors.InProgress)


def test_extend_brings_needs_reconciliation_back_to_in_progress(ks, tenant_id, clock):
    c = claim(ks, tenant_id)
    clock.advance(LEASE)
    refused(ks, tenant_id, errors.NeedsReconciliation)
    r = ks.service.extend(tenant_id, "invoice", "k", c.lease_token, 60, "step2", None)
    assert r.state == "in_progress" and r.checkpoint_step == "step2"


def test_extend_refusals(ks, tenant_id, clock):
    c = claim(ks, tenant_id, on_stale="retry")
    with pytest.raises(errors.LeaseLost):
        ks.service.extend(tenant_id, "invoice", "k", "lt_other", 60, None, None)
    clock.advance(LEASE)
    newer = claim(ks, tenant_id)
    with pytest.raises(errors.LeaseLost):  # fencing
        ks.service.extend(tenant_id, "invoice", "k", c.lease_token, 60, None, None)
    complete(ks, tenant_id, newer.lease_token)
    with pytest.raises(errors.AlreadyCompleted):
        ks.service.extend(tenant_id, "invoice", "k", newer.lease_token, 60, None, None)


# --- lookup and expire --------------------------------------------------------------------

def test_lookup_rows(ks, tenant_id, clock):
    with pytest.raises(errors.NotFound):
        ks.service.lookup(tenant_id, "invoice", "k")
    c = claim(ks, tenant_id, ttl=100)
    clock.advance(LEASE + 1)
    stale = ks.service.lookup(tenant_id, "invoice", "k")
    assert stale.state == "in_progress" and stale.lease_expires_at < clock.now
    complete(ks, tenant_id, c.lease_token)
    clock.advance(100)
    with pytest.raises(errors.Expired):
        ks.service.lookup(tenant_id, "invoice", "k")


def test_expire_rows(ks, tenant_id, clock):
    with pytest.raises(errors.NotFound):
        ks.service.expire(tenant_id, "invoice", "k")
    c = claim(ks, tenant_id)
    with pytest.raises(errors.InProgress):
        ks.service.expire(tenant_id, "invoice", "k")
    complete(ks, tenant_id, c.lease_token)
    clock.advance(1)
    r = ks.service.expire(tenant_id, "invoice", "k")
    assert r.expires_at == clock.now
    clock.advance(1)
    assert ks.service.expire(tenant_id, "invoice", "k") == r  # already expired: unchanged
    again = claim(ks, tenant_id, fp="fp2")
    assert again.outcome is Outcome.ACQUIRED and again.record.incarnation == 2


def test_expire_of_a_stale_lease_is_allowed(ks, tenant_id, clock):
    claim(ks, tenant_id)
    clock.advance(LEASE)
    assert ks.service.expire(tenant_id, "invoice", "k").expires_at == clock.now


# --- tenants ------------------------------------------------------------------------------

def test_tenants_are_independent(ks, tenant_id, clock):
    other = ks.accounts.create_tenant("globex", clock.now)
    a = claim(ks, tenant_id, fp="fp1")
    b = claim(ks, other, fp="fp2")
    assert a.outcome is b.outcome is Outcome.ACQUIRED
    for call in (lambda: complete(ks, other, a.lease_token),
                 lambda: ks.service.release(other, "invoice", "k", a.lease_token, None),
                 lambda: ks.service.extend(other, "invoice", "k", a.lease_token, 5, None, None)):
        with pytest.raises(errors.LeaseLost):
            call()
    complete(ks, tenant_id, a.lease_token)
    assert ks.service.lookup(other, "invoice", "k").state == "in_progress"


# --- answers lost in flight -----------------------------------------------------------------

def claim_statement(ks) -> str:
    """The store's method a claim's first statement goes through: the group's (on by
    default), or the single claim's."""
    return "claim_many" if ks.service.groups is not None else "claim_with_trace"


def lose_first_answer(monkeypatch, obj, name):
    """The call commits, then its answer is lost (as when the database goes away between
    its commit and its reply); later calls behave."""
    real, lost = getattr(obj, name), []

    def once_lost(*args, **kwargs):
        result = real(*args, **kwargs)
        if not lost:
            lost.append(result)
            raise errors.Unavailable()
        return result
    monkeypatch.setattr(obj, name, once_lost)
    return lost


def test_a_claim_whose_answer_was_lost_is_recognised_as_ours(ks, tenant_id, monkeypatch):
    lost = lose_first_answer(monkeypatch, ks.service.records, claim_statement(ks))
    c = claim(ks, tenant_id)
    assert lost and c.outcome is Outcome.ACQUIRED
    assert c.record.duplicate_count == 0  # our own repeat is not counted as a duplicate
    assert complete(ks, tenant_id, c.lease_token).state == "succeeded"


def lose_first_commit_answer(monkeypatch, records):
    """The first transaction commits, then its answer is lost."""
    from contextlib import contextmanager
    real, lost = records.transaction, []

    @contextmanager
    def transaction():
        with real() as cur:
            yield cur
        if not lost:
            lost.append(True)
            raise errors.Unavailable()
    monkeypatch.setattr(records, "transaction", transaction)
    return lost


def test_a_takeover_whose_answer_was_lost_is_recognised_as_ours(ks, tenant_id, clock,
                                                                monkeypatch):
    first = claim(ks, tenant_id)
    ks.service.release(tenant_id, "invoice", "k", first.lease_token, None)
    lost = lose_first_commit_answer(monkeypatch, ks.service.records)
    second = claim(ks, tenant_id)
    assert lost and second.outcome is Outcome.ACQUIRED and second.record.attempt == 2
    assert complete(ks, tenant_id, second.lease_token).state == "succeeded"


def test_a_complete_whose_answer_was_lost_is_answered(ks, tenant_id, monkeypatch):
    c = claim(ks, tenant_id)
    lost = lose_first_commit_answer(monkeypatch, ks.service.records)
    assert complete(ks, tenant_id, c.lease_token).state == "succeeded" and lost


def test_a_batch_whose_answer_was_lost_is_recognised_as_ours(ks, tenant_id, monkeypatch):
    from keystore_service.service.batch import Item
    lost = lose_first_commit_answer(monkeypatch, ks.service.records)
    results = ks.batch.claim(tenant_id, "invoice", [Item("a", None, None, None),
                                                    Item("a", None, None, None),
                                                    Item("b", None, None, None)],
                             3600, 60, "reconcile")
    assert lost
    assert [r.outcome.value for r in results] == ["acquired", "in_progress", "acquired"]
    # the repeat counted the in-batch duplicate once more: an honest over-count, not a loss
    assert ks.service.lookup(tenant_id, "invoice", "a").duplicate_count in (1, 2)
    for r in results[::2]:
        ks.service.complete(tenant_id, "invoice", r.record.key, r.lease_token, "succeeded", "{}")


def test_an_outage_longer_than_the_budget_is_503(ks, tenant_id, monkeypatch):
    ks.service.outage_seconds = 0.3

    def down(*args, **kwargs):
        raise errors.Unavailable()
    monkeypatch.setattr(ks.service.records, claim_statement(ks), down)
    with pytest.raises(errors.Unavailable):
        claim(ks, tenant_id)
