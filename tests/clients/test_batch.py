"""`KeyStore.claim_batch` and versions in the client, against the real service on both
backends: one typed result per item for every outcome, versions older / equal / newer as
integers and as timestamps with offsets, the item of the other kind refused alone, and a
batch whose answer was lost sent again, resuming what it acquired."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from keystore_client import (
    BatchItem,
    BatchResult,
    Claimed,
    FingerprintMismatch,
    InProgress,
    InvalidRequest,
    KeyStore,
    NeedsReconciliation,
    NotFound,
    RetryPolicy,
)

from .faults import FaultProxy
from .support import wait_until_lease_passed


def outcomes(results) -> list:
    return [r.outcome for r in results]


def done(ks, scope, key, **claim) -> None:
    """(scope, key) finished as succeeded with resource_id `R-<key>`."""
    c = ks.claim(scope, key, **claim)
    ks.complete(scope, key, c.lease_token, result={"resource_id": f"R-{key}"})


def test_every_outcome_one_typed_result_per_item_in_order(ks, scope):
    done(ks, scope, "done", payload={"n": 1}, version=1)
    ks.claim(scope, "busy", lease_seconds=60)
    released = ks.claim(scope, "released")
    ks.release(scope, "released", released.lease_token)
    ks.claim(scope, "stale", lease_seconds=1)
    wait_until_lease_passed(ks, scope, "stale")

    results = ks.claim_batch(scope, [
        {"key": "new", "payload": {"n": 1}, "version": 1},
        BatchItem("done", payload={"n": 1}, version=1),
        {"key": "done", "payload": {"n": 2}, "version": 1},
        {"key": "busy"},
        {"key": "released"},
        {"key": "stale"},
        {"key": "done", "version": "2026-11-30T10:00:00Z"},  # the other kind than stored
        {"key": "new", "version": 1},  # the same key again: the first item holds it now
    ], lease_seconds=30)
    assert all(isinstance(r, BatchResult) and isinstance(r, Claimed) for r in results)
    assert outcomes(results) == ["acquired", "replay", "fingerprint_mismatch", "in_progress",
                                 "acquired", "needs_reconciliation", "invalid", "in_progress"]
    assert [r.key for r in results] == ["new", "done", "done", "busy", "released", "stale",
                                        "done", "new"]
    new, replay, mismatch, busy, again, stale, invalid, twice = results
    assert new.acquired and new.lease_token.startswith("lt_") and new.attempt == 1
    assert new.record.version == 1 and new.item == BatchItem("new", {"n": 1}, version=1)
    assert replay.replayed and replay.result.resource_id == "R-done" and not replay.refused
    assert isinstance(mismatch.error, FingerprintMismatch) and mismatch.refused
    assert mismatch.record.result.resource_id == "R-done"  # the original stays intact
    assert isinstance(busy.error, InProgress) and 1 <= busy.retry_after <= 60
    assert again.acquired and again.attempt == 2
    assert isinstance(stale.error, NeedsReconciliation)
    assert isinstance(invalid.error, InvalidRequest) and invalid.lease_token is None
    assert invalid.record.version == 1 and invalid.error.details["field"] == "version"
    assert isinstance(twice.error, InProgress) and twice.lease_token is None
    # what the batch acquired is held like a single claim's lease
    ks.complete(scope, "new", new.lease_token)
    assert ks.lookup(scope, "new").state == "succeeded"


@pytest.mark.parametrize("stored, older, equal, newer, shown", [
    (5, 4, 5, 6, 6),
    ("2026-11-30T10:00:00Z", "2026-11-30T10:59:59+01:00", "2026-11-30T05:00:00-05:00",
     "2026-11-30T11:00:00.000001+01:00", "2026-11-30T10:00:00.000001Z"),
    (datetime(2026, 11, 30, 10, tzinfo=UTC),
     datetime(2026, 11, 30, 9, 59, 59, 999999, tzinfo=UTC),
     datetime(2026, 11, 30, 19, 30, tzinfo=timezone(timedelta(hours=9, minutes=30))),
     datetime(2026, 11, 30, 10, 0, 1, tzinfo=UTC), "2026-11-30T10:00:01Z"),
], ids=["int", "rfc3339-offsets", "aware-datetimes"])
def test_versions_older_equal_newer(ks, scope, stored, older, equal, newer, shown):
    done(ks, scope, "k", payload={"total": 10}, version=stored)
    first = ks.lookup(scope, "k")
    results = ks.claim_batch(scope, [
        BatchItem("k", payload={"total": 99}, version=older),  # older: replay, any payload
        BatchItem("k", payload={"total": 10}, version=equal),
        BatchItem("k", payload={"total": 11}, version=equal),  # equal, other payload
    ])
    assert outcomes(results) == ["replay", "replay", "fingerprint_mismatch"]
    assert all(r.record.version == first.version for r in results)

    newer_result, = ks.claim_batch(scope, [{"key": "k", "payload": {"total": 11},
                                            "version": newer}])
    assert newer_result.acquired and newer_result.attempt == 1  # a new incarnation
    assert newer_result.record.result is None and newer_result.record.first_seen_at > \
        first.first_seen_at
    ks.complete(scope, "k", newer_result.lease_token)
    stored_now = ks.lookup(scope, "k")
    assert stored_now.version == shown  # timestamps in UTC with Z
    if isinstance(shown, str):
        assert stored_now.version_time > first.version_time
        assert stored_now.version_time.tzinfo is not None
    else:
        assert stored_now.version_time is None
    assert ks.claim_batch(scope, [{"key": "k", "version": stored}])[0].replayed  # older now


def test_the_item_of_the_other_kind_is_refused_alone(ks, scope):
    done(ks, scope, "by-time", version="2026-11-30T10:00:00Z")
    results = ks.claim_batch(scope, [{"key": "a"}, {"key": "by-time", "version": 7},
                                     {"key": "b", "version": 7}])
    assert outcomes(results) == ["acquired", "invalid", "acquired"]
    assert results[1].record.version == "2026-11-30T10:00:00Z"
    assert results[1].error.details["stored_kind"] == "time"
    with pytest.raises(InvalidRequest) as info:  # a single claim raises the same error
        ks.claim(scope, "by-time", version=7)
    assert info.value.record.version == "2026-11-30T10:00:00Z"


def test_single_claims_and_the_helper_take_versions(ks, scope):
    calls = []

    @ks.exactly_once(scope, key=lambda order: order["id"], payload=lambda order: order,
                     version=lambda order: order["revision"])
    def sync(order: dict) -> dict:
        calls.append(order["revision"])
        return {"synced": order["revision"]}

    assert sync({"id": "o1", "revision": 1}) == {"synced": 1}
    assert sync({"id": "o1", "revision": 1}) == {"synced": 1}  # the same: replayed
    assert sync({"id": "o1", "revision": 3}) == {"synced": 3}  # newer: runs again
    assert sync({"id": "o1", "revision": 2}) == {"synced": 3}  # older: the newest result
    assert calls == [1, 3]

    with ks.once(scope, "o2", version="2026-11-30T11:00:00+01:00") as op:
        assert op.idempotency_key == f"{scope}:o2@2026-11-30T10:00:00Z"
    assert ks.claim(scope, "o2", version=datetime(2026, 11, 30, 10, 0,
                                                  tzinfo=UTC)).replayed
    with pytest.raises(ValueError):
        ks.claim(scope, "o2", version=datetime(2026, 11, 30))  # naive: which instant?
    with pytest.raises(TypeError):
        ks.claim(scope, "o2", version=1.5)


def test_batch_limits_and_items_checked_before_any_request(ks, scope):
    nowhere = KeyStore("http://127.0.0.1:9", "ks_t", retry=RetryPolicy.never())
    with pytest.raises(ValueError, match="at most 1000"):
        nowhere.claim_batch(scope, [{"key": str(n)} for n in range(1001)])
    with pytest.raises(ValueError, match="verison"):
        nowhere.claim_batch(scope, [{"key": "a", "verison": 1}])
    with pytest.raises(ValueError, match="not both"):
        BatchItem("a", payload=1, fingerprint="f")
    assert nowhere.claim_batch(scope, []) == []

    # a schema error is the whole batch's: refused with 400, nothing written
    with pytest.raises(InvalidRequest) as info:
        ks.claim_batch(scope, [{"key": "ok"}, {"key": "bad", "version": "yesterday"}])
    assert info.value.details["errors"][0]["field"] == "items.1.version"
    with pytest.raises(NotFound):
        ks.lookup(scope, "ok")


def test_a_batch_of_1000_in_one_call(ks, scope):
    items = [{"key": f"k{n}", "version": n, "payload": {"n": n}} for n in range(1000)]
    results = ks.claim_batch(scope, items, lease_seconds=60)
    assert outcomes(results) == ["acquired"] * 1000
    assert [r.key for r in results] == [f"k{n}" for n in range(1000)]
    assert outcomes(ks.claim_batch(scope, items)) == ["in_progress"] * 1000


def test_a_batch_whose_answer_was_lost_is_sent_again_and_each_item_resumes(service, ks,
                                                                            scope):
    """Contract v1.1: every item proposes its lease token, so the client repeats a batch
    whose answer was lost, and what the lost one acquired answers `acquired` again, resumed
    (before v1.1 the batch could not be repeated: its keys waited out their leases)."""
    proxy = FaultProxy(service.url).start()
    try:
        ks.claim(scope, "held")  # another attempt's: stays in progress through the repeat
        client = KeyStore(proxy.url, service.token,
                          retry=RetryPolicy(tries=5, base_delay=0.05, max_delay=0.2, budget=10))
        proxy.drop_answer("/v1/claim/batch")
        results = client.claim_batch(scope, [{"key": "a"}, {"key": "b"}, {"key": "held"}])
        assert proxy.seen["/v1/claim/batch"] == 2  # applied, its answer lost, sent again
        assert [(r.outcome, r.resumed) for r in results] == [
            ("acquired", True), ("acquired", True), ("in_progress", False)]
        assert results[0].lease_token == results[0].item.lease_token  # the one it proposed
        for r in results[:2]:
            client.complete(scope, r.key, r.lease_token)
        assert [ks.lookup(scope, k).attempt for k in "ab"] == [1, 1]
        # anybody else's batch still meets the keys as they are
        assert outcomes(ks.claim_batch(scope, [{"key": "a"}, {"key": "held"}, {"key": "c"}])) \
            == ["replay", "in_progress", "acquired"]
        # a 503 (nothing written) is retried as for single claims
        proxy.answer("/v1/claim/batch", 503, {"Retry-After": "0"},
                     b'{"error":{"code":"unavailable","message":"busy","details":{}}}')
        assert outcomes(client.claim_batch(scope, [{"key": "d"}])) == ["acquired"]
        client.close()
    finally:
        proxy.stop()
