"""Contract v1.1, "a newer version is never a mismatch", over HTTP on both backends.

In v1 a poller whose first attempt was released, or was still running, got 422 and a review
when the record changed before the next poll, and the key stayed stuck until a person acted
(issue 13, item 17). A claim whose version is newer than the stored one is a new intent.
"""
from __future__ import annotations

from tests.integration.support import batch, outcomes

REF = {"scope": "orders", "key": "o-1"}


def claim(http, version, payload, **extra):
    return http.post("/v1/claim", {**REF, "version": version, "payload": payload, **extra})


def open_reviews(http, tokens):
    status, body, _ = http.get("/v1/reviews", token=tokens["acme_operator"])
    assert status == 200
    return body["reviews"]


def test_released_then_changed_is_acquired_as_a_new_incarnation(http, tokens):
    status, first, _ = claim(http, 1, {"total": 10})
    assert status == 201
    http.post("/v1/release", {**REF, "lease_token": first["lease_token"]})
    status, body, _ = claim(http, 2, {"total": 12})
    assert status == 201 and body["outcome"] == "acquired", body
    record = body["record"]
    assert (body["attempt"], record["version"]) == (1, 2)
    assert record["fingerprint"] != first["record"]["fingerprint"]
    assert open_reviews(http, tokens) == []


def test_running_then_changed_waits_for_the_running_attempt(http, tokens):
    status, first, _ = claim(http, 1, {"total": 10})
    status, body, headers = claim(http, 2, {"total": 12})
    assert status == 409 and body["outcome"] == "in_progress" and "Retry-After" in headers
    assert body["record"]["version"] == 1 and body["record"]["duplicate_count"] == 1
    assert open_reviews(http, tokens) == []
    # once the running attempt ends, the newer version gets through
    http.post("/v1/complete", {**REF, "lease_token": first["lease_token"],
                               "state": "succeeded"})
    status, body, _ = claim(http, 2, {"total": 12})
    assert status == 201 and body["record"]["version"] == 2


def test_an_equal_or_older_version_with_another_payload_is_still_a_mismatch(http, tokens):
    status, first, _ = claim(http, 5, {"total": 10})
    http.post("/v1/release", {**REF, "lease_token": first["lease_token"]})
    assert claim(http, 5, {"total": 11})[0] == 422
    assert claim(http, 4, {"total": 11})[0] == 422
    assert [r["kind"] for r in open_reviews(http, tokens)] == ["fingerprint_mismatch"]


def test_a_stale_unknown_outcome_stays_with_the_reconciliation_row(http, clock):
    claim(http, 1, {"total": 10}, lease_seconds=5)
    clock.advance(6)
    status, body, _ = claim(http, 2, {"total": 12})
    assert status == 409 and body["outcome"] == "needs_reconciliation"


def test_in_a_batch_the_later_newer_item_waits_for_the_first(http, tokens):
    results = batch(http, [{"key": "b", "version": 1, "payload": "v1"},
                           {"key": "b", "version": 2, "payload": "v2"}])
    assert outcomes(results) == ["acquired", "in_progress"]
    assert open_reviews(http, tokens) == []
    http.post("/v1/release", {"scope": "orders", "key": "b",
                              "lease_token": results[0]["lease_token"]})
    results = batch(http, [{"key": "b", "version": 3, "payload": "v3"}])
    assert outcomes(results) == ["acquired"] and results[0]["record"]["version"] == 3
