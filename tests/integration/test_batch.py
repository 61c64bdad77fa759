"""POST /v1/claim/batch and versions, over HTTP, on both backends."""
from __future__ import annotations

import json
import threading
from collections import Counter

import pytest

from .support import batch, outcomes, snapshot


def finish(http, result, state="succeeded"):
    status, body, _ = http.post("/v1/complete", {
        "scope": "orders", "key": result["record"]["key"], "lease_token": result["lease_token"],
        "state": state, "result": {"resource_id": "R-" + result["record"]["key"]}})
    assert status == 200, body


def test_every_item_outcome_in_one_batch(http, clock):
    first = batch(http, [{"key": "done", "payload": 1}, {"key": "busy", "payload": 1},
                         {"key": "released", "payload": 1}, {"key": "stale", "payload": 1}],
                  lease_seconds=30)
    assert outcomes(first) == ["acquired"] * 4
    finish(http, first[0])
    http.post("/v1/release", {"scope": "orders", "key": "released",
                              "lease_token": first[2]["lease_token"]})
    clock.advance(10)
    http.post("/v1/extend", {"scope": "orders", "key": "busy",
                             "lease_token": first[1]["lease_token"], "lease_seconds": 60})
    clock.advance(25)  # "stale" ran out (reconcile), "busy" was extended
    results = batch(http, [
        {"key": "new", "payload": 1}, {"key": "done", "payload": 1},
        {"key": "done", "payload": 2}, {"key": "busy", "payload": 1},
        {"key": "released", "payload": 1}, {"key": "stale", "payload": 1}])
    assert outcomes(results) == ["acquired", "replay", "fingerprint_mismatch", "in_progress",
                                 "acquired", "needs_reconciliation"]
    assert results[0]["attempt"] == 1 and results[0]["lease_token"].startswith("lt_")
    assert results[1]["record"]["result"] == {"resource_id": "R-done"}
    assert results[2]["error"]["code"] == "fingerprint_mismatch"
    assert results[3]["error"]["details"]["retry_after_seconds"] == 35
    assert results[4]["attempt"] == 2
    assert results[5]["record"]["state"] == "needs_reconciliation"


def test_the_same_key_twice_first_acquires_the_rest_are_in_progress(http):
    results = batch(http, [{"key": "a"}, {"key": "a"}, {"key": "b"}, {"key": "a"}])
    assert outcomes(results) == ["acquired", "in_progress", "acquired", "in_progress"]
    assert [r["record"]["duplicate_count"] for r in results] == [0, 1, 0, 2]
    status, body, _ = http.get("/v1/keys", scope="orders", key="a")
    assert body["record"]["duplicate_count"] == 2


def test_results_match_claims_one_by_one(http, app, clock):
    """The same items claimed singly on a twin tenant end in the same states and answers."""
    items = [{"key": "x", "payload": 1}, {"key": "y"}, {"key": "x", "payload": 2},
             {"key": "x", "payload": 1}, {"key": "y", "version": 3}]
    got = batch(http, items)
    accounts = app.extensions["keystore"].accounts
    accounts.create_tenant("twin", clock.now)
    twin = type(http)(http.client, accounts.create_token("twin", "client", None, clock.now))
    singles = [twin.post("/v1/claim", {"scope": "orders", **it})[1] for it in items]
    assert outcomes(got) == outcomes(singles)
    def strip(r):
        out = {k: v for k, v in r["record"].items() if k != "review"}
        out["review"] = r["record"]["review"] and {
            k: v for k, v in r["record"]["review"].items() if k != "id"}  # ids differ
        return out
    assert [strip(r) for r in got] == [strip(r) for r in singles]


@pytest.mark.parametrize("n", [1, 1000])
def test_batches_of_one_and_of_a_thousand(http, n):
    items = [{"key": f"order-{i}", "version": i} for i in range(n)]
    results = batch(http, items)
    assert outcomes(results) == ["acquired"] * n
    assert [r["record"]["key"] for r in results] == [f"order-{i}" for i in range(n)]
    assert len({r["lease_token"] for r in results}) == n
    again = batch(http, items)
    assert outcomes(again) == ["in_progress"] * n


@pytest.mark.parametrize("older,equal,newer", [
    (4, 5, 6),
    ("2026-11-30T09:59:59Z", "2026-11-30T11:00:00+01:00", "2026-11-30T10:00:00.000001Z"),
])
def test_versions_older_equal_and_newer(http, older, equal, newer):
    first = batch(http, [{"key": "o", "version": equal, "payload": "v5"}])
    finish(http, first[0])
    results = batch(http, [{"key": "o", "version": older, "payload": "v4"},
                           {"key": "o", "version": equal, "payload": "v5"},
                           {"key": "o", "version": equal, "payload": "changed"},
                           {"key": "o", "version": newer, "payload": "v6"},
                           {"key": "o", "version": newer, "payload": "v6"}])
    assert outcomes(results) == ["replay", "replay", "fingerprint_mismatch", "acquired",
                                 "in_progress"]
    record = results[3]["record"]
    assert record["attempt"] == 1 and record["result"] is None and record["duplicate_count"] == 0
    shown = record["version"]
    assert shown == newer if isinstance(newer, int) else shown == "2026-11-30T10:00:00.000001Z"


def test_a_newer_version_is_a_new_intent_with_a_fresh_window(http, clock):
    first = batch(http, [{"key": "w", "version": 1}], ttl_seconds=100)
    finish(http, first[0])
    clock.advance(50)
    again = batch(http, [{"key": "w", "version": 2}], ttl_seconds=100)[0]["record"]
    assert again["first_seen_at"] != first[0]["record"]["first_seen_at"]
    status, body, _ = http.get("/v1/keys", scope="orders", key="w")
    assert body["record"]["version"] == 2


def test_an_item_of_the_other_version_kind_is_refused_alone(http, app):
    first = batch(http, [{"key": "t", "version": "2026-11-30T10:00:00Z"}])
    finish(http, first[0])
    before = snapshot(app)["records"]
    results = batch(http, [{"key": "t", "version": 7}, {"key": "u", "version": 7}])
    assert results[0]["error"]["code"] == "invalid_request" and "outcome" not in results[0]
    assert results[0]["record"]["version"] == "2026-11-30T10:00:00Z"
    assert outcomes(results)[1] == "acquired"
    assert [r for r in snapshot(app)["records"] if r[3] == "t"] == \
        [r for r in before if r[3] == "t"]


def test_the_single_claim_refuses_the_other_kind_with_400(http):
    assert http.post("/v1/claim", {"scope": "orders", "key": "k", "version": 1})[0] == 201
    status, body, _ = http.post("/v1/claim", {"scope": "orders", "key": "k",
                                              "version": "2026-11-30T10:00:00Z"})
    assert status == 400 and body["error"]["code"] == "invalid_request"


BAD_BATCHES = [
    {"scope": "orders", "items": []},
    {"scope": "orders", "items": [{"key": f"k{i}"} for i in range(1001)]},
    {"scope": "orders", "items": [{"key": "a"}, {"key": ""}]},
    {"scope": "orders", "items": [{"key": "a"}, {"key": "b", "version": -1}]},
    {"scope": "orders", "items": [{"key": "a"}, {"key": "b", "version": "yesterday"}]},
    {"scope": "orders", "items": [{"key": "a"}, {"key": "b", "version": 1.5}]},
    {"scope": "orders", "items": [{"key": "a"}, {"key": "b", "payload": 1, "fingerprint": "f"}]},
    {"scope": "orders", "items": [{"key": "a", "extra": 1}]},
    {"scope": "orders", "items": [{"key": "a"}], "ttl_seconds": 0},
    {"scope": "bad scope", "items": [{"key": "a"}]},
    {"items": [{"key": "a"}]},
]


@pytest.mark.parametrize("body", BAD_BATCHES)
def test_a_schema_error_refuses_the_whole_batch_and_writes_nothing(http, app, body):
    before = snapshot(app)
    status, got, _ = http.post("/v1/claim/batch", body)
    assert status == 400 and got["error"]["code"] == "invalid_request"
    assert snapshot(app) == before


def test_a_payload_beyond_a_double_refuses_the_whole_batch(http, app):
    before = snapshot(app)
    raw = b'{"scope":"orders","items":[{"key":"a"},{"key":"b","payload":1e999}]}'
    status, got, _ = http.post("/v1/claim/batch", raw=raw)
    assert status == 400 and got["error"]["details"]["field"] == "items.1.payload"
    assert snapshot(app) == before


def test_keys_compare_exactly_inside_a_batch(http):
    results = batch(http, [{"key": "K"}, {"key": "k"}, {"key": "k "}, {"key": "é"},
                           {"key": "e\u0301"}])
    assert outcomes(results) == ["acquired"] * 5


# --- concurrent batches ---------------------------------------------------------------------

def concurrent_batches(ks, tenant_id, key_sets, version_of):
    from keystore_service.service.batch import Item
    barrier = threading.Barrier(len(key_sets))
    out = [None] * len(key_sets)

    def run(i):
        items = [Item(k, None, "int", version_of(i, k)) for k in key_sets[i]]
        barrier.wait()
        out[i] = ks.batch.claim(tenant_id, "orders", items, 3600, 60, "reconcile")
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(key_sets))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


@pytest.mark.parametrize("batches", [2, 8])
def test_concurrent_batches_over_overlapping_keys(ks, tenant_id, clock, batches):
    keys = [f"k{i:03d}" for i in range(200)]
    key_sets = [keys[i * 10: i * 10 + 120] for i in range(batches)]  # heavy overlap
    out = concurrent_batches(ks, tenant_id, key_sets, lambda i, k: 1)
    acquired = Counter(r.record.key for results in out for r in results
                       if r.outcome and r.outcome.value == "acquired")
    assert set(acquired.values()) == {1}  # each key acquired by exactly one batch
    assert set(acquired) == set().union(*map(set, key_sets))
    finish_all(ks, tenant_id, out)  # then send newer versions
    clock.advance(1)
    out = concurrent_batches(ks, tenant_id, key_sets, lambda i, k: 2 + i % 3)
    per_version = Counter((r.record.key, r.record.version) for results in out for r in results
                          if r.outcome and r.outcome.value == "acquired")
    assert set(per_version.values()) == {1}  # exactly one batch per key and version
    for (key, version), _ in per_version.items():  # the stored version is the acquired one
        assert ks.service.lookup(tenant_id, "orders", key).version == version
    finish_all(ks, tenant_id, out)
    # the batches that saw "in progress" send again, as pollers do, until nothing more is
    # acquired: then every record holds the maximum version seen (3 versions: <= 3 rounds)
    for _ in range(4):
        retry = concurrent_batches(ks, tenant_id, key_sets, lambda i, k: 2 + i % 3)
        finish_all(ks, tenant_id, retry)
        if not any(r.lease_token for results in retry for r in results):
            break
    for key in set().union(*map(set, key_sets)):
        seen = [2 + i % 3 for i, ks_ in enumerate(key_sets) if key in ks_]
        assert ks.service.lookup(tenant_id, "orders", key).version == max(seen)


def finish_all(ks, tenant_id, out):
    for results in out:
        for r in results:
            if r.lease_token:
                ks.service.complete(tenant_id, "orders", r.record.key, r.lease_token,
                                    "succeeded", "{}")


def test_two_batches_with_versions_5_and_7_end_with_7(ks, tenant_id, clock):
    from keystore_service.service.batch import Item
    first = ks.batch.claim(tenant_id, "orders", [Item("r", None, "int", 1)], 3600, 60,
                           "reconcile")
    ks.service.complete(tenant_id, "orders", "r", first[0].lease_token, "succeeded", "{}")
    for _ in range(10):
        out = concurrent_batches(ks, tenant_id, [["r"], ["r"]], lambda i, k: (5, 7)[i])
        for results in out:
            if results[0].lease_token:
                ks.service.complete(tenant_id, "orders", "r", results[0].lease_token,
                                    "succeeded", "{}")
        # whichever went first, a retry of the loser converges on the newest version
        ks.batch.claim(tenant_id, "orders", [Item("r", None, "int", 5)], 3600, 60, "reconcile")
        late = ks.batch.claim(tenant_id, "orders", [Item("r", None, "int", 7)], 3600, 60,
                              "reconcile")
        if late[0].lease_token:
            ks.service.complete(tenant_id, "orders", "r", late[0].lease_token, "succeeded", "{}")
        assert ks.service.lookup(tenant_id, "orders", "r").version == 7
        assert json.loads(ks.service.lookup(tenant_id, "orders", "r").result) == {}
        clock.advance(1)
