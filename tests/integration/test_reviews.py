"""Reviews and resolutions over HTTP, on both backends: every resolve action on every kind
of review item, the audit trail, the queue's filters and pages."""
from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from keystore_service.storage.tables import attempts, resolutions
from tests.support import Http

from .support import CLAIM, REF, acquire, complete, mismatch


@pytest.fixture
def op(http, tokens):
    return Http(http.client, tokens["acme_operator"])


def stale(http, clock):
    lease = acquire(http, lease_seconds=10)
    clock.advance(10)
    status, body, _ = http.post("/v1/claim", CLAIM)
    assert (status, body["outcome"]) == (409, "needs_reconciliation")
    return lease, body


def audit_rows(app):
    with app.extensions["keystore"].database.engine.connect() as conn:
        return conn.execute(select(resolutions).order_by(resolutions.c.id)).all()


def test_a_mismatch_opens_one_review_and_counts_on_it(http, op):
    complete(http, acquire(http))
    first = mismatch(http, 5)
    review = first["record"]["review"]
    assert (review["kind"], review["count"], review["state"]) == ("fingerprint_mismatch", 1,
                                                                  "open")
    again = mismatch(http, 6)["record"]["review"]
    assert (again["id"], again["count"]) == (review["id"], 2)
    assert again["original_fingerprint"] == first["record"]["fingerprint"]
    assert len(again["refused_fingerprints"]) == 2
    status, body, _ = http.get("/v1/keys", **REF)
    assert body["record"]["review"]["id"] == review["id"]
    assert body["record"]["state"] == "succeeded" and body["record"]["duplicate_count"] == 0


def test_dismiss_keeps_the_original_and_closes_the_mismatch(http, op, app):
    complete(http, acquire(http))
    mismatch(http)
    status, before, _ = http.get("/v1/keys", **REF)
    status, body, _ = op.post("/v1/resolve", {**REF, "action": "dismiss"})
    assert status == 200 and len(body["closed_reviews"]) == 1
    after = body["record"]
    assert after["review"] is None
    assert {k: v for k, v in after.items() if k != "review"} == \
        {k: v for k, v in before["record"].items() if k != "review"}
    status, body, _ = op.get("/v1/reviews", state="resolved")
    assert [(r["resolution"], r["resolved_by"]) for r in body["reviews"]] == \
        [("dismiss", "operator-1")]
    row = audit_rows(app)[-1]
    assert (row.action, row.actor, row.scope, row.key) == ("dismiss", "operator-1", *REF.values())
    assert json.loads(row.before)["state"] == json.loads(row.after)["state"] == "succeeded"


@pytest.mark.parametrize("action", ["mark_succeeded", "mark_failed", "release"])
def test_a_mismatch_on_a_finished_record_can_only_be_dismissed(http, op, action):
    complete(http, acquire(http))
    mismatch(http)
    status, body, _ = op.post("/v1/resolve", {**REF, "action": action})
    assert (status, body["error"]["code"]) == (409, "already_completed")


@pytest.mark.parametrize("action,state", [("mark_succeeded", "succeeded"),
                                          ("mark_failed", "failed"), ("release", "released")])
def test_every_settling_action_on_a_stale_lease(http, op, app, clock, action, state):
    lease, _ = stale(http, clock)
    body = {**REF, "action": action}
    if action != "release":
        body["result"] = {"resource_id": "INV-42", "status_code": 201}
    status, got, _ = op.post("/v1/resolve", body)
    assert status == 200, got
    record = got["record"]
    assert record["state"] == state and record["review"] is None and len(got["closed_reviews"]) == 1
    if action != "release":
        assert record["result"] == {"resource_id": "INV-42", "status_code": 201}
    # the resolution replaced the holder's token: fencing
    status, got, _ = http.post("/v1/complete", {**REF, "lease_token": lease,
                                                "state": "succeeded"})
    assert (status, got["error"]["code"]) == (409, "lease_lost")
    status, got, _ = op.get("/v1/reviews", state="resolved", kind="stale_lease")
    assert got["reviews"][0]["resolution"] == action
    with app.extensions["keystore"].database.engine.connect() as conn:
        ended = conn.execute(select(attempts.c.ending, attempts.c.reason)).all()
    assert ended == [("resolved", f"{action} by operator-1")]
    row = audit_rows(app)[-1]
    assert (json.loads(row.before)["state"], json.loads(row.after)["state"]) == \
        ("needs_reconciliation", state)
    next_claim = http.post("/v1/claim", CLAIM)
    assert next_claim[1]["outcome"] == ("acquired" if state == "released" else "replay")


def test_dismiss_is_refused_on_a_stale_lease(http, op, clock):
    stale(http, clock)
    status, body, _ = op.post("/v1/resolve", {**REF, "action": "dismiss"})
    assert (status, body["error"]["code"]) == (400, "invalid_request")
    review_id = http.get("/v1/keys", **REF)[1]["record"]["review"]["id"]
    status, body, _ = op.post("/v1/resolve", {**REF, "action": "dismiss",
                                              "review_id": review_id})
    assert status == 400


@pytest.mark.parametrize("action", ["mark_succeeded", "mark_failed", "release", "dismiss"])
def test_every_action_on_a_mismatch_while_in_progress(http, op, action):
    lease = acquire(http)
    mismatch(http)
    status, body, _ = op.post("/v1/resolve", {**REF, "action": action})
    assert status == 200, body
    expected = {"mark_succeeded": "succeeded", "mark_failed": "failed", "release": "released",
                "dismiss": "in_progress"}[action]
    assert body["record"]["state"] == expected and body["record"]["review"] is None
    holder = http.post("/v1/complete", {**REF, "lease_token": lease, "state": "succeeded"})
    assert holder[0] == (200 if action == "dismiss" else 409)


def test_dismiss_without_an_open_review_is_404(http, op):
    complete(http, acquire(http))
    status, body, _ = op.post("/v1/resolve", {**REF, "action": "dismiss"})
    assert (status, body["error"]["code"]) == (404, "not_found")
    status, body, _ = op.post("/v1/resolve", {**REF, "action": "release", "review_id": 999})
    assert status == 404
    status, body, _ = op.post("/v1/resolve", {"scope": "x", "key": "y", "action": "release"})
    assert status == 404


def test_a_review_id_resolves_only_that_review(http, op, clock):
    lease = acquire(http, lease_seconds=10)
    mismatch(http)
    clock.advance(10)
    http.post("/v1/claim", CLAIM)  # the stale lease opens a second review
    status, body, _ = op.get("/v1/reviews", **REF)
    kinds = {r["kind"]: r["id"] for r in body["reviews"]}
    assert set(kinds) == {"fingerprint_mismatch", "stale_lease"}
    status, body, _ = op.post("/v1/resolve", {**REF, "action": "dismiss",
                                              "review_id": kinds["fingerprint_mismatch"]})
    assert body["closed_reviews"] == [kinds["fingerprint_mismatch"]]
    assert body["record"]["review"]["id"] == kinds["stale_lease"]
    assert lease


def test_a_resolution_and_its_audit_row_commit_together(http, op, app, clock, monkeypatch):
    stale(http, clock)
    reviews = app.extensions["keystore"].service.reviews

    def broken_audit(*args, **kwargs):
        raise RuntimeError("the audit insert failed")
    monkeypatch.setattr(reviews, "audit", broken_audit)
    status, body, _ = op.post("/v1/resolve", {**REF, "action": "release"})
    assert status == 500
    monkeypatch.undo()
    status, body, _ = http.get("/v1/keys", **REF)
    assert body["record"]["state"] == "needs_reconciliation" and body["record"]["review"]
    assert audit_rows(app) == []


def test_the_holder_settling_late_closes_the_stale_review(http, op, clock):
    lease, _ = stale(http, clock)
    complete(http, lease)
    status, body, _ = op.get("/v1/reviews", state="resolved")
    assert [r["resolution"] for r in body["reviews"]] == ["completed_by_holder"]
    status, body, _ = op.get("/v1/reviews")
    assert body["reviews"] == []


def test_stale_refusals_count_on_the_review(http, clock):
    stale(http, clock)
    for _ in range(3):
        http.post("/v1/claim", CLAIM)
    review = http.get("/v1/keys", **REF)[1]["record"]["review"]
    assert (review["kind"], review["count"]) == ("stale_lease", 4)


def test_a_new_incarnation_supersedes_open_reviews(http, op, clock):
    complete(http, acquire(http, ttl_seconds=60))
    mismatch(http)
    clock.advance(60)
    assert http.post("/v1/claim", {**CLAIM, "payload": {"amount": 999}})[0] == 201
    status, body, _ = op.get("/v1/reviews", state="resolved")
    assert [r["resolution"] for r in body["reviews"]] == ["superseded"]


def test_the_queue_filters_and_pages(http, op, clock):
    for n in range(7):
        key = f"evt-{n}"
        lease = http.post("/v1/claim", {"scope": "a" if n % 2 else "b", "key": key,
                                        "payload": 1})[1]["lease_token"]
        http.post("/v1/complete", {"scope": "a" if n % 2 else "b", "key": key,
                                   "lease_token": lease, "state": "succeeded"})
        http.post("/v1/claim", {"scope": "a" if n % 2 else "b", "key": key, "payload": 2})
        clock.advance(60)
    seen, cursor = [], None
    while True:
        params = {"limit": "3", **({"cursor": cursor} if cursor else {})}
        status, body, _ = op.get("/v1/reviews", **params)
        assert status == 200
        seen += [r["key"] for r in body["reviews"]]
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert seen == [f"evt-{n}" for n in range(7)]  # oldest first, each once
    assert [r["key"] for r in op.get("/v1/reviews", scope="a")[1]["reviews"]] == \
        ["evt-1", "evt-3", "evt-5"]
    aged = op.get("/v1/reviews", min_age_seconds="200")[1]["reviews"]
    assert [r["key"] for r in aged] == ["evt-0", "evt-1", "evt-2", "evt-3"]
    assert op.get("/v1/reviews", kind="stale_lease")[1]["reviews"] == []
    assert op.get("/v1/reviews", cursor="garbage")[0] == 400
    assert op.get("/v1/reviews", limit="501")[0] == 400
    item = op.get("/v1/reviews", key="evt-0")[1]["reviews"][0]
    assert item["record"]["key"] == "evt-0" and item["record"]["state"] == "succeeded"


def test_operator_calls_need_an_operator_token(http):
    assert http.get("/v1/reviews")[0] == 403
    assert http.post("/v1/resolve", {**REF, "action": "dismiss"})[0] == 403
    assert http.get("/v1/report", date="2027-01-15")[0] == 403


def test_a_tenant_sees_only_its_own_reviews(http, op, tokens):
    complete(http, acquire(http))
    mismatch(http)
    other_op = Http(http.client, tokens["globex"])
    assert other_op.get("/v1/reviews")[0] == 403  # a client token
    assert len(op.get("/v1/reviews")[1]["reviews"]) == 1


def test_expiring_a_record_is_audited(http, op, app):
    complete(http, acquire(http))
    status, body, _ = op.post("/v1/expire", REF)
    assert status == 200
    row = audit_rows(app)[-1]
    assert (row.action, row.actor) == ("expire", "operator-1")
    assert json.loads(row.after)["expires_at"] < json.loads(row.before)["expires_at"]
    assert op.post("/v1/expire", REF)[0] == 200  # already expired: unchanged, not audited
    assert len(audit_rows(app)) == 1
