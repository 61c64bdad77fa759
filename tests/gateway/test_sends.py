"""POST /v1/send end to end (issue 28, both backends): the key claimed and the request queued in
one transaction, the sender beside the relay making it to a real HTTP API on 127.0.0.1
(tests/support/downstream.py), and each answer of the contract's table: a 2xx with its
resource id (201 sent), a permanent 4xx never retried (200 failed), a 503 then a success
with the same key both times, a timeout after the API created the invoice (without an
idempotency header and without a check: needs_reconciliation with a send_unknown review at
once; with one: retried with the same key, one invoice), repeats (replay, in_progress,
mismatch), and ten concurrent sends of one key making one request."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client import REGISTRY

from keystore_service.storage.send_tables import send_attempts, sends
from keystore_service.storage.tables import reviews
from tests.support.downstream import Downstream, answer, stall

from .send_support import SECRET, connection, rows, send



@pytest.fixture
def api():
    with Downstream() as a:
        yield a


@pytest.fixture
def deduping():
    with Downstream(dedupe_header="Idempotency-Key") as a:
        yield a


@pytest.fixture
def relay(gw_app):
    ks = gw_app.extensions["keystore"]
    ks.gateway.sender.rand = lambda: 0.0  # backoff of 0 s: a retry is due at once
    running = ks.gateway.start_relay(ks.settings, "send-relay")
    yield ks.gateway
    running.stop(5)


def sent_total(outcome: str) -> float:
    return REGISTRY.get_sample_value("keystore_sends_total", {
        "tenant": "acme", "connection": "billing", "outcome": outcome}) or 0.0


def test_a_2xx_is_sent_with_its_resource_id_and_a_repeat_replays(gw, gw_app, relay, api, op):
    connection(gw, api.url)
    before = sent_total("succeeded")
    status, body, headers = send(gw, token=op["client"])
    assert status == 201, body
    assert body["outcome"] == "sent"
    assert body["result"]["status_code"] == 201
    assert body["result"]["resource_id"] == "in_1"
    assert body["result"]["body"]["id"] == "in_1"
    assert body["record"]["state"] == "succeeded"
    seen = api.requests_seen()
    assert len(seen) == 1 and seen[0].headers.get("authorization") == f"Bearer {SECRET}"
    assert seen[0].body == {"amount": 100, "reference": "billing:k1"}

    status, again, headers = send(gw, token=op["client"])
    assert status == 200 and again["outcome"] == "replay"
    assert headers["Idempotent-Replayed"] == "true"
    assert again["result"] == body["result"]
    assert api.requests() == 1  # a repeat never makes a second request
    [row] = rows(gw_app, sends)
    assert row["state"] == "succeeded" and row["sealed"] is None  # dropped as it settled
    assert sent_total("succeeded") == before + 1  # the request, not its replay


def test_a_permanent_refusal_is_failed_and_never_retried(gw, gw_app, relay, api):
    connection(gw, api.url)
    api.script(answer(422), n=1)
    status, body, _ = send(gw)
    assert status == 200 and body["outcome"] == "failed", body
    assert body["result"]["status_code"] == 422
    assert body["record"]["state"] == "failed"
    status, again, headers = send(gw)
    assert status == 200 and again["outcome"] == "replay" and again["result"] == body["result"]
    assert api.requests() == 1 and api.created() == 0
    assert [a["class"] for a in rows(gw_app, send_attempts)] == ["failed"]


def test_a_503_then_a_success_with_the_same_key_both_times(gw, gw_app, relay, deduping):
    connection(gw, deduping.url, idempotency_header="Idempotency-Key")
    deduping.script(answer(503), n=1)
    status, body, _ = send(gw)
    assert status == 201, body
    seen = deduping.requests_seen()
    assert len(seen) == 2
    assert {s.headers["idempotency-key"] for s in seen} == {"billing:k1"}
    assert deduping.created() == 1
    assert [a["class"] for a in rows(gw_app, send_attempts)] == ["retry", "succeeded"]


def test_a_timeout_without_idempotency_header_or_check_needs_a_person(gw, gw_app, relay,
                                                                      api):
    connection(gw, api.url, timeout_seconds=1)
    api.script(stall(3), n=1)  # the API creates, then answers after the client gave up
    status, body, _ = send(gw)
    assert status == 409 and body["error"]["code"] == "needs_reconciliation", body
    assert api.created() == 1 and api.requests() == 1  # never a blind retry
    [row] = rows(gw_app, sends)
    assert row["state"] == "unresolved" and row["unknown"] == 1 and row["sealed"] is None
    kinds = [(r["kind"], r["state"]) for r in rows(gw_app, reviews)]
    assert kinds == [("send_unknown", "open")]
    status, again, _ = send(gw)
    assert status == 409 and again["error"]["code"] == "needs_reconciliation"
    assert api.requests() == 1


def test_a_timeout_with_an_idempotency_header_is_retried_with_the_same_key(
        gw, gw_app, relay, deduping):
    connection(gw, deduping.url, timeout_seconds=1, idempotency_header="Idempotency-Key")
    deduping.script(stall(3), n=1)
    status, body, _ = send(gw, wait=20)
    assert status == 201, body
    assert deduping.created() == 1  # the retry was deduped by the API: one invoice
    assert deduping.keys() == {"billing:k1": 1}
    assert [a["class"] for a in rows(gw_app, send_attempts)][-1] == "succeeded"
    assert rows(gw_app, send_attempts)[0]["class"] == "unknown"


def test_ten_concurrent_sends_of_one_key_make_one_request(gw_app, relay, api, op):
    client = gw_app.test_client()
    from tests.support import Http
    gw = Http(client, op["operator"])
    connection(gw, api.url)

    def one(_):
        return send(Http(gw_app.test_client(), op["client"]))[:2]
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(one, range(10)))
    assert api.requests() == 1 and api.created() == 1
    outcomes = sorted(str(b.get("outcome") or b["error"]["code"]) for _, b in answers)
    # one of them is the first (sent, or accepted when it found no seat to wait in); the
    # others replay it or are told it runs
    assert set(outcomes) <= {"sent", "accepted", "replay", "in_progress"}, outcomes
    assert outcomes.count("sent") + outcomes.count("accepted") == 1, outcomes


def test_another_payload_for_the_key_is_a_mismatch(gw, relay, api):
    connection(gw, api.url)
    assert send(gw)[0] == 201
    status, body, _ = send(gw, request={"method": "POST", "path": "/invoices",
                                        "json": {"amount": 999}})
    assert status == 422 and body["error"]["code"] == "fingerprint_mismatch"
    assert api.requests() == 1


@pytest.mark.parametrize("path", ["//evil.example/x", "http://x/y", "/a/../b", "/a/%2e%2e/b",
                                  "/a/%2E%2e", "/a\r\nX: y", "/a/./b", "invoices", "/a%2fb",
                                  "/a\\b"])
def test_paths_that_leave_the_base_url_are_400_with_nothing_stored(gw, gw_app, api, path):
    connection(gw, api.url)
    status, body, _ = send(gw, request={"method": "POST", "path": path, "json": {}})
    assert status == 400 and body["error"]["code"] == "invalid_request", body
    assert rows(gw_app, sends) == []
    assert gw.get("/v1/keys", scope="billing", key="k1")[0] == 404


@pytest.mark.parametrize("request_, field", [
    ({"method": "GET", "path": "/x"}, "method"),
    ({"method": "POST", "path": "/x", "headers": {"Host": "evil"}}, "headers"),
    ({"method": "POST", "path": "/x", "headers": {"X-A": "a\r\nb"}}, "headers"),
    ({"method": "POST", "path": "/x", "json": {}, "body_base64": "e30="}, "body"),
])
def test_bad_requests_are_400_with_nothing_stored(gw, gw_app, api, request_, field):
    connection(gw, api.url, idempotency_header="Idempotency-Key")
    status, body, _ = send(gw, request=request_)
    assert status == 400, (field, body)
    assert rows(gw_app, sends) == []


def test_the_idempotency_header_and_a_big_body_are_refused(gw, gw_app, api):
    connection(gw, api.url, idempotency_header="Idempotency-Key")
    status, _, _ = send(gw, request={"method": "POST", "path": "/x",
                                     "headers": {"idempotency-key": "mine"}})
    assert status == 400
    import base64
    big = base64.b64encode(b"x" * (64 * 1024 + 1)).decode()
    status, body, _ = send(gw, request={"method": "POST", "path": "/x", "body_base64": big})
    assert status in (400, 413), body
    assert rows(gw_app, sends) == []


def test_an_unknown_connection_is_404(gw, gw_app):
    status, body, _ = send(gw)
    assert status == 404 and body["error"]["code"] == "not_found"
    assert rows(gw_app, sends) == []


def test_credentials_are_in_no_answer_and_no_log(gw, gw_app, relay, api, caplog):
    import logging
    caplog.set_level(logging.DEBUG)
    connection(gw, api.url, timeout_seconds=1)
    api.script(stall(3), n=2)
    texts = [json.dumps(send(gw)[1]), json.dumps(send(gw, key="k2")[1]),
             json.dumps(gw.get("/v1/keys", scope="billing", key="k2")[1])]
    assert all(SECRET not in t for t in texts)
    assert SECRET not in caplog.text
    assert all(SECRET not in (r["sealed"] or "") for r in rows(gw_app, sends))


def test_accepted_when_not_settled_within_the_wait(gw, gw_app, api):
    connection(gw, api.url)  # no relay runs: the send stays queued
    status, body, _ = send(gw, wait=0)
    assert status == 202 and body == {"outcome": "accepted", "record": body["record"]}
    assert body["record"]["state"] == "in_progress"
    status, busy, headers = send(gw, wait=0)
    assert status == 409 and busy["error"]["code"] == "in_progress"
    assert 1 <= int(headers["Retry-After"]) <= 60
    [row] = rows(gw_app, sends)
    assert row["state"] == "queued" and row["sealed"] and SECRET not in row["sealed"]


def test_a_payload_is_the_fingerprint_when_given(gw, relay, api):
    connection(gw, api.url)
    assert send(gw, payload={"order": 7})[0] == 201
    status, body, _ = send(gw, payload={"order": 7}, request={
        "method": "POST", "path": "/invoices", "json": {"amount": 1, "note": "retyped"}})
    assert status == 200 and body["outcome"] == "replay"  # the same intent: no request
    status, body, _ = send(gw, payload={"order": 8})
    assert status == 422 and body["error"]["code"] == "fingerprint_mismatch"
    assert api.requests() == 1


def test_a_send_a_person_released_is_sent_again_with_its_key(gw, gw_app, relay, api, op):
    connection(gw, api.url, timeout_seconds=1)
    api.script(stall(3), n=1)
    assert send(gw)[0] == 409  # needs_reconciliation: the API may have made it
    status, body, _ = gw.post("/v1/resolve", {"scope": "billing", "key": "k1",
                                              "action": "release"})
    assert status == 200, body  # the person found no invoice: do it again
    status, body, _ = send(gw, token=op["client"])
    assert status == 201 and body["record"]["attempt"] == 2, body
    seen = api.requests_seen()
    assert [s.key for s in seen] == ["billing:k1", "billing:k1"]
    [row] = rows(gw_app, sends)  # the incarnation's one send, made again
    assert row["state"] == "succeeded" and row["sealed"] is None


def test_a_patched_connection_takes_effect_at_the_next_send(gw, gw_app, relay, api):
    """The sender makes a send with its connection as the take read it (storage/sends.py),
    not read again: a PATCH of its base URL and headers reaches the next send, which goes to
    the new API with the new header, and the old API gets nothing more."""
    connection(gw, api.url)
    status, body, _ = send(gw, key="k1")
    assert status == 201 and body["outcome"] == "sent", body
    assert api.requests() == 1
    with Downstream() as other:
        r = gw.client.patch("/v1/connections/billing", headers=gw._auth(...), json={
            "base_url": other.url, "headers": {"Authorization": "Bearer sk_live_rotated"}})
        assert r.status_code == 200, r.get_json(silent=True)
        status, body, _ = send(gw, key="k2")
        assert status == 201 and body["outcome"] == "sent", body
        [seen] = other.requests_seen()
        assert seen.headers.get("authorization") == "Bearer sk_live_rotated"
        assert seen.body == {"amount": 100, "reference": "billing:k2"}
    assert api.requests() == 1
