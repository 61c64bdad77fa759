"""Contract v1.1 kept payloads, on both backends: a person sees what a refused mismatch
changed; kept only when asked (or configured for a scope), at most 64 KiB, shown only to
operators, deleted with the review and when the record expires, never logged."""
from __future__ import annotations

import json

from sqlalchemy import func, select

from keystore_service.storage.tables import kept_payloads, reviews

REF = {"scope": "invoice", "key": "evt-1"}


def count(app, table, *where) -> int:
    with app.extensions["keystore"].database.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table).where(*where)).scalar()


def mismatch(http, keep=True):
    original = {"amount": 1250, "lines": [{"sku": "A", "qty": 1}]}
    status, claimed, _ = http.post("/v1/claim", {**REF, "payload": original,
                                                 "keep_payload": keep, "ttl_seconds": 600})
    assert status == 201
    refused = {"amount": 9999, "lines": [{"sku": "A", "qty": 2}]}
    status, body, _ = http.post("/v1/claim", {**REF, "payload": refused, "keep_payload": keep})
    assert status == 422
    return claimed, original, refused, body


def test_an_operator_sees_both_payloads_a_client_sees_neither(http, tokens):
    claimed, original, refused, answer = mismatch(http)
    assert "kept" not in json.dumps(answer["record"])  # the client's answer: no payloads
    status, body, _ = http.get("/v1/reviews", token=tokens["acme_operator"])
    (review,) = body["reviews"]
    assert review["kept"] == {"original": original, "refused": refused}
    status, body, _ = http.get("/v1/keys", **REF)
    assert "9999" not in json.dumps(body)


def test_nothing_is_kept_unless_asked(app, http, tokens):
    mismatch(http, keep=False)
    status, body, _ = http.get("/v1/reviews", token=tokens["acme_operator"])
    assert "kept" not in body["reviews"][0]
    assert count(app, kept_payloads) == 0


def test_over_64_kib_is_413_and_writes_nothing(app, http):
    status, body, _ = http.post("/v1/claim", {**REF, "payload": "x" * (64 * 1024),
                                              "keep_payload": True})
    assert status == 413 and body["error"]["details"]["field"] == "payload"
    assert http.get("/v1/keys", **REF)[0] == 404


def test_deleted_with_the_review_and_when_the_record_expires(app, http, tokens, clock):
    mismatch(http)
    assert count(app, reviews, reviews.c.kept.is_not(None)) == 1
    http.post("/v1/resolve", {**REF, "action": "dismiss"}, token=tokens["acme_operator"])
    assert count(app, reviews, reviews.c.kept.is_not(None)) == 0
    assert count(app, kept_payloads) == 1  # the record's own, until it expires
    clock.advance(600)
    app.extensions["keystore"].jobs.sweep()
    assert count(app, kept_payloads) == 0
