"""Races between real threads on real databases: the database, not memory, picks one winner."""
from __future__ import annotations

from collections import Counter

import pytest

from keystore_service import errors
from keystore_service.service.claims import Claim

from .support import THREADS, outcome, race


def claim_fn(ks, tenant_id, key, on_stale="reconcile"):
    return lambda i: ks.service.claim(tenant_id, Claim("race", key, "fp", 3600, 30, on_stale))


@pytest.mark.parametrize("round_", range(5))
def test_one_winner_among_concurrent_first_claims(ks, tenant_id, round_):
    results = race(claim_fn(ks, tenant_id, f"new-{round_}"))
    assert Counter(map(outcome, results)) == {"acquired": 1, "in_progress": THREADS - 1}


def test_one_winner_among_concurrent_claims_of_a_released_key(ks, tenant_id):
    first = ks.service.claim(tenant_id, Claim("race", "rel", "fp", 3600, 30, "reconcile"))
    ks.service.release(tenant_id, "race", "rel", first.lease_token, None)
    results = race(claim_fn(ks, tenant_id, "rel"))
    assert Counter(map(outcome, results)) == {"acquired": 1, "in_progress": THREADS - 1}
    winner = next(r for r in results if outcome(r) == "acquired")
    assert winner.record.attempt == 2


def test_one_winner_among_concurrent_takeovers_of_a_stale_lease(ks, tenant_id, clock):
    ks.service.claim(tenant_id, Claim("race", "stale", "fp", 3600, 30, "retry"))
    clock.advance(30)
    results = race(claim_fn(ks, tenant_id, "stale"))
    assert Counter(map(outcome, results)) == {"acquired": 1, "in_progress": THREADS - 1}


def test_one_winner_among_concurrent_claims_of_an_expired_key(ks, tenant_id, clock):
    first = ks.service.claim(tenant_id, Claim("race", "exp", "fp", 10, 5, "reconcile"))
    ks.service.complete(tenant_id, "race", "exp", first.lease_token, "succeeded", "{}")
    clock.advance(10)
    results = race(claim_fn(ks, tenant_id, "exp"))
    assert Counter(map(outcome, results)) == {"acquired": 1, "in_progress": THREADS - 1}
    assert next(r for r in results if outcome(r) == "acquired").record.incarnation == 2


def test_stale_reconcile_is_marked_once_and_counted_by_everyone(ks, tenant_id, clock):
    ks.service.claim(tenant_id, Claim("race", "rec", "fp", 3600, 30, "reconcile"))
    clock.advance(30)
    results = race(claim_fn(ks, tenant_id, "rec"))
    assert Counter(map(outcome, results)) == {"needs_reconciliation": THREADS}
    assert ks.service.lookup(tenant_id, "race", "rec").duplicate_count == THREADS


def test_a_late_holder_and_a_takeover_never_both_win(ks, tenant_id, clock):
    for n in range(10):
        key = f"fence-{n}"
        first = ks.service.claim(tenant_id, Claim("race", key, "fp", 3600, 30, "retry"))
        clock.advance(30)

        def act(i, key=key, token=first.lease_token):
            if i == 0:
                return ks.service.complete(tenant_id, "race", key, token, "succeeded", "{}")
            return ks.service.claim(tenant_id, Claim("race", key, "fp", 3600, 30, "retry"))
        results = race(act, n=2)
        holder, claimer = results
        if isinstance(holder, errors.LeaseLost):
            assert outcome(claimer) == "acquired"
        else:
            assert not isinstance(holder, Exception), holder
            assert outcome(claimer) == "replay"


def test_concurrent_replays_are_identical_and_all_counted(ks, tenant_id):
    first = ks.service.claim(tenant_id, Claim("race", "done", "fp", 3600, 30, "reconcile"))
    ks.service.complete(tenant_id, "race", "done", first.lease_token, "succeeded",
                        '{"resource_id":"INV-1"}')
    results = race(claim_fn(ks, tenant_id, "done"))
    assert {outcome(r) for r in results} == {"replay"}
    assert {r.record.result for r in results} == {'{"resource_id":"INV-1"}'}
    assert sorted(r.record.duplicate_count for r in results) == list(range(1, THREADS + 1))
