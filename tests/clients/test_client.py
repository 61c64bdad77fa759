"""`KeyStore`'s calls and their typed results and errors, against the real service on both
backends: every error class that the service can be made to answer is raised with its status,
code, message, the response and the record."""
from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from keystore_client import (
    AlreadyCompleted,
    APIError,
    Claimed,
    Expired,
    FingerprintMismatch,
    Forbidden,
    InProgress,
    InvalidRequest,
    KeyStore,
    KeyStoreError,
    LeaseLost,
    NeedsReconciliation,
    NotFound,
    PayloadTooLarge,
    Record,
    Result,
    Unauthorized,
)

from .support import wait_until_lease_passed


def test_claim_complete_replay_with_typed_results(ks, scope):
    first = ks.claim(scope, "evt-1", payload={"amount": 1250}, lease_seconds=30)
    assert isinstance(first, Claimed) and first.acquired and not first.replayed
    assert first.lease_token.startswith("lt_") and first.attempt == 1
    assert first.record.state == "in_progress" and first.record.fingerprint.startswith("sha256:")
    assert isinstance(first.record.first_seen_at, datetime)
    assert first.record.first_seen_at.tzinfo is not None

    done = ks.complete(scope, "evt-1", first.lease_token,
                       result=Result("INV-42", 201, {"total": 1250}))
    assert isinstance(done, Record) and done.state == "succeeded" and done.finished
    assert done.result == Result("INV-42", 201, {"total": 1250})

    again = ks.claim(scope, "evt-1", payload={"amount": 1250})
    assert again.replayed and again.lease_token is None
    assert again.result.resource_id == "INV-42" and again.record.duplicate_count == 1
    # the same complete again is idempotent: a retry after a lost answer is safe
    assert ks.complete(scope, "evt-1", first.lease_token,
                       result={"resource_id": "INV-42", "status_code": 201,
                               "body": {"total": 1250}}).state == "succeeded"


def test_lookup_extend_with_checkpoint_and_release(ks, scope):
    c = ks.claim(scope, "k", lease_seconds=5)
    before = ks.lookup(scope, "k").lease_expires_at
    r = ks.extend(scope, "k", c.lease_token, 60, checkpoint="invoice_created",
                  resource_id="INV-7")
    assert r.lease_expires_at > before
    assert (r.checkpoint.step, r.checkpoint.resource_id) == ("invoice_created", "INV-7")
    released = ks.release(scope, "k", c.lease_token, reason="upstream 503")
    assert released.state == "released"
    assert ks.claim(scope, "k").attempt == 2


def test_lookup_wait_returns_when_the_record_finishes(ks, scope):
    c = ks.claim(scope, "k", lease_seconds=30)

    import threading
    timer = threading.Timer(0.5, lambda: ks.complete(scope, "k", c.lease_token))
    timer.start()
    started = time.monotonic()
    record = ks.lookup(scope, "k", wait=20)
    timer.join()
    assert record.state == "succeeded" and time.monotonic() - started < 15


@pytest.mark.parametrize("action, outcome", [("complete", "replay"), ("release", "acquired")])
def test_a_claim_that_waits_is_one_request_answered_by_what_the_holder_did(
        service, ks, scope, action, outcome):
    """`wait` is the service's `wait_seconds`: one claim, no lookups in between, and the
    duplicate is counted once (the client's old claim / poll / claim-again loop is gone)."""
    import threading

    from .faults import FaultProxy
    holder = ks.claim(scope, "k", lease_seconds=30)
    proxy = FaultProxy(service.url).start()
    try:
        waiting = KeyStore(proxy.url, service.token)
        done = getattr(ks, action)
        timer = threading.Timer(0.5, lambda: done(scope, "k", holder.lease_token))
        timer.start()
        started = time.monotonic()
        got = waiting.claim(scope, "k", wait=10)
        timer.join()
        assert got.outcome == outcome and 0.4 < time.monotonic() - started < 8
        assert dict(proxy.seen) == {"/v1/claim": 1}  # nothing but the one claim
        assert ks.lookup(scope, "k").duplicate_count == (1 if action == "complete" else 0)
        waiting.close()
    finally:
        proxy.stop()


def test_a_claim_that_waits_in_vain_raises_in_progress_counted_once(ks, scope):
    ks.claim(scope, "k", lease_seconds=30)
    started = time.monotonic()
    with pytest.raises(InProgress) as info:
        ks.claim(scope, "k", wait=0.2)  # rounded up to a whole second
    assert 0.9 < time.monotonic() - started < 8 and info.value.retry_after >= 1
    assert ks.lookup(scope, "k").duplicate_count == 1


@pytest.mark.parametrize("wait, error", [(31, ValueError), (-1, ValueError),
                                         (float("nan"), TypeError), (float("inf"), ValueError),
                                         (True, TypeError), ("5", TypeError)])
def test_a_wait_the_service_cannot_take_is_refused_before_any_request(wait, error):
    nowhere = KeyStore("http://127.0.0.1:9", "ks_t")
    with pytest.raises(error):
        nowhere.claim("s", "k", wait=wait)


@pytest.mark.parametrize("token", ["lt_short", "lt_" + "a" * 65, "xx_" + "a" * 24,
                                   "lt_" + "a" * 23 + "\n", "lt_" + "٣" * 24, 12345])
def test_a_malformed_proposed_token_is_refused_before_any_request(token):
    nowhere = KeyStore("http://127.0.0.1:9", "ks_t")
    with pytest.raises(ValueError, match="lease token"):
        nowhere.claim("s", "k", lease_token=token)


def test_every_claim_proposes_a_fresh_token_of_its_own(ks, scope):
    from keystore_client import new_lease_token
    a, b = ks.claim(scope, "a"), ks.claim(scope, "b")
    assert a.lease_token != b.lease_token and len(a.lease_token) == 3 + 32
    mine = new_lease_token()
    assert ks.claim(scope, "c", lease_token=mine).lease_token == mine


def test_refused_claims_raise_their_error_with_the_record(ks, scope):
    ks.claim(scope, "k", payload={"a": 1}, lease_seconds=30)
    with pytest.raises(InProgress) as info:
        ks.claim(scope, "k", payload={"a": 1})
    err = info.value
    assert (err.status, err.code, err.outcome) == (409, "in_progress", "in_progress")
    assert err.response.status_code == 409 and 1 <= err.retry_after <= 30
    assert err.record.state == "in_progress" and err.details["retry_after_seconds"] >= 1
    assert isinstance(err, APIError) and isinstance(err, KeyStoreError)

    with pytest.raises(FingerprintMismatch) as info:
        ks.claim(scope, "k", payload={"a": 2})
    assert (info.value.status, info.value.code) == (422, "fingerprint_mismatch")
    assert info.value.record.key == "k"


def test_a_lapsed_lease_is_refused_as_needs_reconciliation(ks, scope):
    ks.claim(scope, "k", lease_seconds=1)
    wait_until_lease_passed(ks, scope, "k")
    with pytest.raises(NeedsReconciliation) as info:
        ks.claim(scope, "k")
    assert info.value.status == 409 and info.value.record.state == "needs_reconciliation"


def test_holder_errors(ks, scope):
    c = ks.claim(scope, "k")
    ks.complete(scope, "k", c.lease_token, result={"resource_id": "A"})
    with pytest.raises(AlreadyCompleted) as info:
        ks.complete(scope, "k", c.lease_token, result={"resource_id": "B"})
    assert info.value.status == 409 and info.value.record.result.resource_id == "A"

    old = ks.claim(scope, "k2")
    ks.release(scope, "k2", old.lease_token)
    ks.claim(scope, "k2")
    with pytest.raises(LeaseLost) as info:
        ks.complete(scope, "k2", old.lease_token)
    assert info.value.code == "lease_lost"

    with pytest.raises(NotFound) as info:
        ks.lookup(scope, "never-claimed")
    assert (info.value.status, info.value.code) == (404, "not_found")


def test_request_errors(service, ks, scope):
    with pytest.raises(InvalidRequest) as info:
        ks.claim("not a scope!", "k")
    assert info.value.status == 400 and info.value.details["errors"]
    with pytest.raises(PayloadTooLarge):
        ks.claim(scope, "big", payload="x" * (1024 * 1024 + 10))
    with pytest.raises(Unauthorized) as info:
        KeyStore(service.url, "ks_wrong").claim(scope, "k")
    assert info.value.status == 401
    with pytest.raises(Forbidden):
        ks.expire(scope, "k")  # expire needs the operator role


def test_expire_makes_the_next_claim_a_new_incarnation(ks, operator, scope):
    c = ks.claim(scope, "k")
    ks.complete(scope, "k", c.lease_token)
    r = operator.expire(scope, "k")
    assert r.expires_at <= datetime.now(UTC)
    with pytest.raises(Expired) as info:
        ks.lookup(scope, "k")
    assert (info.value.status, info.value.code) == (404, "expired")
    fresh = ks.claim(scope, "k")
    assert fresh.acquired and fresh.attempt == 1


def test_the_client_never_shows_its_token():
    ks = KeyStore("http://127.0.0.1:9", "ks_secret_value")
    assert "ks_secret_value" not in repr(ks)
    with pytest.raises(ValueError):
        KeyStore("127.0.0.1:8080", "t")  # no scheme: refused before any request
