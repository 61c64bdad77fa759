"""No request makes the service build much more than a small multiple of docs/api.md's
limits: the stored results one answer carries are bounded (issue 13, item 3)."""
from __future__ import annotations

import json

from keystore_service.service.claims import ANSWER_RESULTS_BYTES
from tests.integration.support import snapshot

BIG = "x" * (255 * 1024)  # a result body just under docs/api.md's 256 KiB


def done(http, scope, key, body=BIG, payload=None):
    status, claimed, _ = http.post("/v1/claim", {"scope": scope, "key": key,
                                                 "payload": payload})
    assert status == 201, claimed
    status, answer, _ = http.post("/v1/complete", {
        "scope": scope, "key": key, "lease_token": claimed["lease_token"],
        "state": "succeeded", "result": {"body": body}})
    assert status == 200, answer


def test_a_key_repeated_in_a_batch_cannot_multiply_its_result(app, http):
    done(http, "orders", "big")
    before = snapshot(app)
    items = [{"key": "big"}] * 100 + [{"key": "new-1"}]
    raw = json.dumps({"scope": "orders", "items": items}).encode()
    assert len(raw) < 2000  # 1.5 KB asked for ~26 MB of answer in v0.1
    status, body, _ = http.post("/v1/claim/batch", raw=raw,
                                headers={"Content-Type": "application/json"})
    assert status == 413 and body["error"]["code"] == "payload_too_large"
    assert body["error"]["details"] == {"reason": "answer_too_large",
                                        "limit_bytes": ANSWER_RESULTS_BYTES}
    assert snapshot(app) == before  # nothing written: not new-1, not the repeats' counts


def test_a_batch_within_the_budget_gets_every_result(http):
    done(http, "orders", "big")
    status, body, _ = http.post("/v1/claim/batch", {"scope": "orders",
                                                    "items": [{"key": "big"}] * 16})
    assert status == 200
    assert [r["outcome"] for r in body["results"]] == ["replay"] * 16
    assert all(r["record"]["result"]["body"] == BIG for r in body["results"])


def test_a_page_of_reviews_stops_at_the_budget_and_the_rest_follows(http, tokens):
    keys = [f"k{n:02d}" for n in range(20)]
    for key in keys:
        done(http, "orders", key, payload={"n": 1})
        assert http.post("/v1/claim", {"scope": "orders", "key": key,
                                       "payload": {"n": 2}})[0] == 422
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 500, **({"cursor": cursor} if cursor else {})}
        status, body, _ = http.get("/v1/reviews", token=tokens["acme_operator"], **params)
        assert status == 200, body
        pages += 1
        size = sum(len(json.dumps(r["record"]["result"])) for r in body["reviews"])
        assert size <= ANSWER_RESULTS_BYTES + 64 * 1024
        assert all(r["record"]["result"]["body"] == BIG for r in body["reviews"])
        seen += [r["key"] for r in body["reviews"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == keys and pages == 2
