"""docs/operations.md "Settlement by asking the destination", over the API (both backends):
a connection, the scope's settlement, a claim whose worker died, and what a person then
sees: nothing to do when the check found the invoice (the key replays its result, the
review is resolved settled_by_check by check, with the audit row), the check's answers on
the open review when it could not tell."""
from __future__ import annotations

import json

import pytest

from tests.gateway.check_server import INVOICE, CheckServer, answering
from tests.support import Http


@pytest.fixture
def api():
    server = CheckServer()
    yield server
    server.close()


@pytest.fixture
def settled(gw_app, gw, api):
    status, body, _ = gw.post("/v1/connections", {
        "name": "billing", "base_url": api.base.rstrip("/"), "timeout_seconds": 2,
        "headers": {"Authorization": "Bearer sk_test_123"}})
    assert status == 201, body
    r = gw.client.put("/v1/scopes/create_invoice/settlement", json={
        "connection": "billing", "on_absent": "release",
        "check": {"path": "/invoices?reference={reference}",
                  "found": {"pointer": "/data/0"}, "resource_id": "/data/0/id",
                  "absent": "/data"}},
        headers={"Authorization": f"Bearer {gw.token}"})
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["settlement"]["on_absent"] == "release"
    return gw_app.extensions["keystore"]


def _died(client: Http, clock, ks, key: str) -> None:
    """A worker claims `key` for 30 s and dies; the reconciler finds the lease run out."""
    status, body, _ = client.post("/v1/claim", {"scope": "create_invoice", "key": key,
                                                "lease_seconds": 30})
    assert status == 201, body
    clock.advance(31)
    ks.jobs.reconcile()


def test_a_found_invoice_settles_the_claim_without_a_person(settled, gw, op, api, clock):
    client = Http(gw.client, op["client"])
    _died(client, clock, settled, "order-1001")
    assert settled.gateway.settlement_pass.run()["found"] == 1
    assert api.requests[0]["path"] == "/api/invoices?reference=create_invoice%3Aorder-1001"
    assert api.requests[0]["headers"]["Authorization"] == "Bearer sk_test_123"
    status, body, headers = client.post("/v1/claim", {"scope": "create_invoice",
                                                      "key": "order-1001"})
    assert (status, body["outcome"], headers["Idempotent-Replayed"]) == (200, "replay", "true")
    assert body["record"]["result"]["resource_id"] == "in_42"
    _, open_reviews, _ = gw.get("/v1/reviews", state="open", scope="create_invoice")
    assert open_reviews["reviews"] == []
    _, closed, _ = gw.get("/v1/reviews", state="resolved", scope="create_invoice")
    review, = closed["reviews"]
    assert (review["kind"], review["resolution"], review["resolved_by"]) == (
        "stale_lease", "settled_by_check", "check")


def test_an_unclear_check_leaves_the_review_with_what_it_saw(settled, gw, op, api, clock):
    client = Http(gw.client, op["client"])
    _died(client, clock, settled, "order-1002")
    answering(api, 503, {"error": "maintenance"})
    for wait in (0, 30, 60):
        clock.advance(wait)
        settled.gateway.settlement_pass.run()
    assert len(api.requests) == 3
    status, body, _ = client.post("/v1/claim", {"scope": "create_invoice", "key": "order-1002"})
    assert (status, body["error"]["code"]) == (409, "needs_reconciliation")
    _, found, _ = gw.get("/v1/reviews", state="open", scope="create_invoice")
    review, = found["reviews"]
    checks = review["kept"]["refused"]["checks"]
    assert [(c["verdict"], c["status_code"]) for c in checks] == [("unclear", 503)] * 3
    assert json.loads(checks[0]["answer"]) == {"error": "maintenance"}
    status, body, _ = gw.post("/v1/resolve", {"scope": "create_invoice", "key": "order-1002",
                                              "action": "mark_succeeded",
                                              "result": {"resource_id": INVOICE["id"]}})
    assert status == 200 and body["record"]["state"] == "succeeded"
