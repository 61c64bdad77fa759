"""A tenant can never see or touch another tenant's records, through any endpoint; tokens
are stored only as hashes and compared in constant time."""
from __future__ import annotations

import hmac

from sqlalchemy import select

from keystore_service.storage.tables import metadata
from keystore_service.web.api.openapi import document
from tests.support import T0, Http

REF = {"scope": "invoice", "key": "evt-1"}


def setup_victim(http, clock):
    """Tenant acme: a finished record with a mismatch review, and a stale one."""
    lease = http.post("/v1/claim", {**REF, "payload": 1})[1]["lease_token"]
    http.post("/v1/complete", {**REF, "lease_token": lease, "state": "succeeded",
                               "result": {"resource_id": "INV-SECRET"}})
    http.post("/v1/claim", {**REF, "payload": 2})  # mismatch -> review
    status, _, _ = http.post("/v1/sources", {
        "name": "shop", "provider": "generic", "signature": None,
        "event_id": {"header": "X-Id"}, "destination": {"url": "http://127.0.0.1:9/"}},
        token=http.operator)
    assert status == 201
    status, _, _ = http.post("/v1/alert-channels", {
        "name": "ops", "kind": "webhook", "url": "http://127.0.0.1:9/alerts"},
        token=http.operator)
    assert status == 201
    status, _, _ = http.post("/v1/connections", {
        "name": "billing", "base_url": "http://127.0.0.1:9/api",
        "headers": {"Authorization": "Bearer CONN-SECRET"}}, token=http.operator)
    assert status == 201
    status, _, _ = _put(Http(http.client, http.operator), "/v1/scopes/invoice/settlement", {
        "connection": "billing", "on_absent": "review", "check": {
            "path": "/invoices/{key}", "found": {"pointer": "/id"}, "absent_status": [404]}})
    assert status == 200
    stale = http.post("/v1/claim", {"scope": "invoice", "key": "evt-2", "lease_seconds": 5})
    clock.advance(5)
    http.post("/v1/claim", {"scope": "invoice", "key": "evt-2"})  # -> needs_reconciliation
    return lease, stale[1]["lease_token"]


def test_every_endpoint_with_a_foreign_token(app, http, tokens, clock):
    http.operator = tokens["acme_operator"]
    lease, stale_lease = setup_victim(http, clock)
    accounts = app.extensions["keystore"].accounts
    foreign_op = Http(http.client, accounts.create_token("globex", "operator", None, T0))
    foreign = Http(http.client, tokens["globex"])
    before = http.get("/v1/keys", **REF)[1]["record"]
    app.extensions["keystore"].gateway.issues.watch()  # acme's review: reviews_waiting
    issue = http.get("/v1/issues", token=http.operator)[1]["issues"][0]  # one of acme's
    status, job, _ = http.post("/v1/deliveries/bulk", {
        "action": "retry", "filter": {"source": "shop"}}, token=http.operator)
    assert status == 202, job
    job_id = job["job"]["id"]
    channel = http.get("/v1/alert-channels/ops", token=http.operator)[1]
    connection = http.get("/v1/connections/billing", token=http.operator)[1]
    settlement = http.get("/v1/scopes/invoice/settlement", token=http.operator)[1]
    calls = {
        ("GET", "/v1/keys"): lambda: foreign.get("/v1/keys", **REF),
        ("POST", "/v1/complete"): lambda: foreign.post("/v1/complete", {
            **REF, "lease_token": lease, "state": "failed"}),
        ("POST", "/v1/release"): lambda: foreign.post("/v1/release", {
            "scope": "invoice", "key": "evt-2", "lease_token": stale_lease}),
        ("POST", "/v1/extend"): lambda: foreign.post("/v1/extend", {
            "scope": "invoice", "key": "evt-2", "lease_token": stale_lease,
            "lease_seconds": 60}),
        ("POST", "/v1/expire"): lambda: foreign_op.post("/v1/expire", REF),
        ("POST", "/v1/resolve"): lambda: foreign_op.post("/v1/resolve", {
            "scope": "invoice", "key": "evt-2", "action": "release"}),
        ("GET", "/v1/reviews"): lambda: foreign_op.get("/v1/reviews"),
        ("GET", "/v1/report"): lambda: foreign_op.get("/v1/report", date="2027-01-15"),
        ("GET", "/v1/whoami"): lambda: foreign.get("/v1/whoami"),
        ("GET", "/v1/sources"): lambda: foreign_op.get("/v1/sources"),
        ("POST", "/v1/sources"): lambda: foreign.post("/v1/sources", {}),
        ("GET", "/v1/sources/{name}"): lambda: foreign_op.get("/v1/sources/shop"),
        ("PATCH", "/v1/sources/{name}"): lambda: _patch(foreign_op, "/v1/sources/shop"),
        ("DELETE", "/v1/sources/{name}"): lambda: _delete(foreign_op, "/v1/sources/shop"),
        ("POST", "/v1/sources/{name}/resume"): lambda: foreign_op.post(
            "/v1/sources/shop/resume"),
        ("GET", "/v1/deliveries"): lambda: foreign_op.get("/v1/deliveries"),
        ("POST", "/v1/deliveries/redeliver"): lambda: foreign_op.post(
            "/v1/deliveries/redeliver", {"source": "shop", "event_id": "evt-1"}),
        ("POST", "/v1/sources/{name}/pause"): lambda: foreign_op.post(
            "/v1/sources/shop/pause", {}),
        ("POST", "/v1/deliveries/retry"): lambda: foreign_op.post(
            "/v1/deliveries/retry", {"source": "shop"}),
        ("GET", "/v1/issues"): lambda: foreign_op.get("/v1/issues"),
        **{("POST", f"/v1/issues/{{id}}/{act}"): (lambda act=act: foreign_op.post(
            f"/v1/issues/{issue['id']}/{act}", {})) for act in ("acknowledge", "resolve",
                                                                "ignore")},
        ("POST", "/v1/alert-channels"): lambda: foreign.post("/v1/alert-channels", {}),
        ("GET", "/v1/alert-channels"): lambda: foreign_op.get("/v1/alert-channels"),
        ("GET", "/v1/alert-channels/{name}"): lambda: foreign_op.get("/v1/alert-channels/ops"),
        ("PATCH", "/v1/alert-channels/{name}"): lambda: _patch(
            foreign_op, "/v1/alert-channels/ops", {"remind_after_seconds": 5}),
        ("DELETE", "/v1/alert-channels/{name}"): lambda: _delete(
            foreign_op, "/v1/alert-channels/ops"),
        ("POST", "/v1/alert-channels/{name}/test"): lambda: foreign_op.post(
            "/v1/alert-channels/ops/test", {}),
        ("POST", "/v1/deliveries/bulk"): lambda: foreign_op.post("/v1/deliveries/bulk", {
            "action": "retry", "filter": {"source": "shop"}, "dry_run": True}),
        ("GET", "/v1/jobs/{id}"): lambda: foreign_op.get(f"/v1/jobs/{job_id}"),
        ("POST", "/v1/jobs/{id}/cancel"): lambda: foreign_op.post(f"/v1/jobs/{job_id}/cancel",
                                                                 {}),
        ("POST", "/v1/connections"): lambda: foreign.post("/v1/connections", {}),
        ("GET", "/v1/connections"): lambda: foreign_op.get("/v1/connections"),
        ("GET", "/v1/connections/{name}"): lambda: foreign_op.get("/v1/connections/billing"),
        ("PATCH", "/v1/connections/{name}"): lambda: _patch(
            foreign_op, "/v1/connections/billing", {"timeout_seconds": 1}),
        ("DELETE", "/v1/connections/{name}"): lambda: _delete(
            foreign_op, "/v1/connections/billing"),
        ("GET", "/v1/scopes/{scope}/settlement"): lambda: foreign_op.get(
            "/v1/scopes/invoice/settlement"),
        ("PUT", "/v1/scopes/{scope}/settlement"): lambda: _put(
            foreign_op, "/v1/scopes/invoice/settlement", {
                "connection": "billing", "on_absent": "release", "check": {
                    "path": "/x", "found": {"pointer": "/id"}, "absent_status": [404]}}),
        ("DELETE", "/v1/scopes/{scope}/settlement"): lambda: _delete(
            foreign_op, "/v1/scopes/invoice/settlement"),
        ("POST", "/v1/send"): lambda: foreign.post("/v1/send", {
            "scope": "invoice", "key": "send-1", "connection": "billing", "wait_seconds": 0,
            "request": {"method": "POST", "path": "/invoices", "json": {"amount": 1}}}),
        ("POST", "/v1/claim"): lambda: foreign.post("/v1/claim", {**REF, "payload": 3}),
        ("POST", "/v1/claim/batch"): lambda: foreign.post("/v1/claim/batch", {
            "scope": "invoice", "items": [{"key": "evt-1", "payload": 3},
                                          {"key": "evt-2"}]}),
    }
    documented = {(m.upper(), p) for p, ops in document()["paths"].items() for m in ops
                  if p.startswith("/v1/")}
    assert documented == set(calls), "a new endpoint needs its cross-tenant case here"
    answers = {call: fn() for call, fn in calls.items()}
    for call in [("GET", "/v1/keys"), ("POST", "/v1/complete"), ("POST", "/v1/release"),
                 ("POST", "/v1/extend"), ("POST", "/v1/expire"), ("POST", "/v1/resolve")]:
        status, body, _ = answers[call]
        assert (status, body["error"]["code"]) == (404, "not_found"), call
    assert answers[("GET", "/v1/reviews")][1]["reviews"] == []
    assert answers[("GET", "/v1/report")][1]["scopes"] == []
    assert answers[("GET", "/v1/whoami")][1]["tenant"] == "globex"  # its own tenant only
    assert answers[("GET", "/v1/sources")][1]["sources"] == []
    assert answers[("GET", "/v1/deliveries")][1]["deliveries"] == []
    assert answers[("POST", "/v1/sources")][0] == 403  # a client token
    for call in [("GET", "/v1/sources/{name}"), ("PATCH", "/v1/sources/{name}"),
                 ("DELETE", "/v1/sources/{name}"), ("POST", "/v1/sources/{name}/resume"),
                 ("POST", "/v1/deliveries/redeliver"), ("POST", "/v1/sources/{name}/pause"),
                 ("POST", "/v1/deliveries/retry"), ("POST", "/v1/issues/{id}/acknowledge"),
                 ("POST", "/v1/issues/{id}/resolve"), ("POST", "/v1/issues/{id}/ignore"),
                 ("GET", "/v1/alert-channels/{name}"), ("PATCH", "/v1/alert-channels/{name}"),
                 ("DELETE", "/v1/alert-channels/{name}"),
                 ("POST", "/v1/alert-channels/{name}/test"), ("GET", "/v1/jobs/{id}"),
                 ("POST", "/v1/jobs/{id}/cancel")]:
        assert answers[call][0] == 404, call
    assert answers[("GET", "/v1/issues")][1]["issues"] == []
    assert answers[("GET", "/v1/alert-channels")][1]["channels"] == []
    assert answers[("POST", "/v1/alert-channels")][0] == 403  # a client token
    assert answers[("POST", "/v1/deliveries/bulk")][1] == {"matched": 0}  # acme's source
    for call in [("GET", "/v1/connections/{name}"), ("PATCH", "/v1/connections/{name}"),
                 ("DELETE", "/v1/connections/{name}"), ("GET", "/v1/scopes/{scope}/settlement"),
                 ("DELETE", "/v1/scopes/{scope}/settlement")]:
        assert answers[call][0] == 404, call
    assert answers[("GET", "/v1/connections")][1]["connections"] == []
    status, body, _ = answers[("POST", "/v1/send")]  # through acme's connection: none
    assert (status, body["error"]["code"]) == (404, "not_found")
    assert foreign.get("/v1/keys", scope="invoice", key="send-1")[0] == 404  # nothing claimed
    assert answers[("POST", "/v1/connections")][0] == 403  # a client token
    status, body, _ = answers[("PUT", "/v1/scopes/{scope}/settlement")]  # acme's connection
    assert (status, body["error"]["details"]["field"]) == (400, "connection")
    assert http.get("/v1/connections/billing", token=http.operator)[1] == connection
    assert http.get("/v1/scopes/invoice/settlement", token=http.operator)[1] == settlement
    # acme's issue, channel and job as they were
    assert http.get("/v1/issues", token=http.operator)[1]["issues"][0] == issue
    assert http.get("/v1/alert-channels/ops", token=http.operator)[1] == channel
    assert http.get(f"/v1/jobs/{job_id}", token=http.operator)[0] == 200
    assert answers[("POST", "/v1/claim")][1]["outcome"] == "acquired"  # its own record
    assert [r["outcome"] for r in answers[("POST", "/v1/claim/batch")][1]["results"]] == \
        ["in_progress", "acquired"]  # its own records: evt-1 was just claimed above
    leaked = str(answers)
    assert "INV-SECRET" not in leaked and before["fingerprint"] not in leaked
    assert "CONN-SECRET" not in leaked
    after = http.get("/v1/keys", **REF)[1]["record"]
    assert after == before  # acme's record untouched
    assert http.get("/v1/keys", scope="invoice", key="evt-2")[1]["record"]["state"] == \
        "needs_reconciliation"


def test_tokens_are_stored_only_as_hashes(app, http, tokens):
    lease = http.post("/v1/claim", {**REF, "payload": 1})[1]["lease_token"]
    engine = app.extensions["keystore"].database.engine
    with engine.connect() as conn:
        dump = repr([conn.execute(select(t)).all() for t in metadata.sorted_tables])
    for secret in [*tokens.values(), lease]:
        assert secret not in dump


def test_tokens_are_compared_in_constant_time(app, tokens, monkeypatch):
    compared = []
    real = hmac.compare_digest

    def spy(a, b):
        compared.append(True)
        return real(a, b)
    monkeypatch.setattr(hmac, "compare_digest", spy)
    accounts = app.extensions["keystore"].accounts
    assert accounts.principal(tokens["acme"]) is not None and compared


def _patch(http, path, body=None):
    r = http.client.patch(path, json=body or {"max_in_flight": 1}, headers=http._auth(...))
    return r.status_code, r.get_json(silent=True), r.headers


def _put(http, path, body):
    r = http.client.put(path, json=body, headers=http._auth(...))
    return r.status_code, r.get_json(silent=True), r.headers


def _delete(http, path):
    r = http.client.delete(path, headers=http._auth(...))
    return r.status_code, r.get_json(silent=True), r.headers
