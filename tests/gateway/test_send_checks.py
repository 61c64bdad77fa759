"""A send whose outcome is unknown (issue 28, both backends), against the scripted downstream
API on 127.0.0.1: the connection's check runs at once (found: the record succeeded with the
invoice's id, one invoice; absent: sent again with the same reference, one invoice; unclear
three times: needs_reconciliation with a send_unknown review that keeps the checks' answers);
the retry window's end (failed, or needs_reconciliation after an unknown attempt); and a
sender that stopped mid-request, taken over as an unknown outcome."""
from __future__ import annotations

import json
import time

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import update

from keystore_service.gateway import sender as sender_module
from keystore_service.storage.send_tables import connections, record_checks, send_attempts, sends
from keystore_service.storage.tables import reviews
from tests.support.downstream import Downstream, answer, refuse, stall

from .send_support import connection, rows, send

CHECK = {"method": "GET", "path": "/invoices?reference={reference}",
         "found": {"pointer": "/data/0"}, "resource_id": "/data/0/id", "absent": "/data"}


@pytest.fixture
def api():
    with Downstream() as a:
        yield a


@pytest.fixture
def ks(gw_app):
    ks = gw_app.extensions["keystore"]
    ks.gateway.sender.rand = lambda: 0.0
    return ks


@pytest.fixture
def relay(ks):
    running = ks.gateway.start_relay(ks.settings, "check-relay")
    yield ks.gateway
    running.stop(5)


def test_a_lost_answer_found_by_the_check_is_sent(gw, gw_app, relay, api):
    connection(gw, api.url, timeout_seconds=1, check=CHECK)
    api.script(stall(3), n=1)  # created, answered too late
    status, body, _ = send(gw, wait=20)
    assert status == 201, body
    assert body["outcome"] == "sent" and body["result"]["resource_id"] == "in_1"
    assert api.created() == 1 and api.requests() == 1 and api.requests(method="GET") == 1
    [row] = rows(gw_app, sends)
    assert row["state"] == "succeeded" and row["sealed"] is None and row["unknown"] == 1
    assert [c["verdict"] for c in rows(gw_app, record_checks)] == ["found"]
    assert rows(gw_app, reviews) == []


def test_an_effect_the_check_finds_absent_is_sent_again_once(gw, gw_app, relay, api):
    connection(gw, api.url, check=CHECK)
    api.script(refuse(), n=1)  # the connection reset after the request went out
    status, body, _ = send(gw, wait=20)
    assert status == 201, body
    assert api.requests() == 2 and api.created() == 1  # the second one created it
    assert [c["verdict"] for c in rows(gw_app, record_checks)] == ["absent"]
    [row] = rows(gw_app, sends)
    assert row["state"] == "succeeded" and row["unknown"] == 0


def test_an_unclear_check_three_times_asks_a_person_with_its_answers(
        gw, gw_app, relay, api, monkeypatch):
    monkeypatch.setattr(sender_module, "CHECK_BACKOFF_SECONDS", (0, 0, 0))
    connection(gw, api.url, timeout_seconds=1, check=CHECK)
    api.script(stall(3), n=1)
    for n in (1, 2, 3):
        api.script(answer(503), n=n, method="GET")
    status, body, _ = send(gw, wait=20)
    assert status == 409 and body["error"]["code"] == "needs_reconciliation", body
    assert api.requests() == 1 and api.requests(method="GET") == 3
    [row] = rows(gw_app, sends)
    assert row["state"] == "unresolved" and row["check_tries"] == 3 and row["sealed"] is None
    [review] = rows(gw_app, reviews)
    assert review["kind"] == "send_unknown" and review["state"] == "open"
    kept = json.loads(review["kept"])
    assert [c["verdict"] for c in kept["checks"]] == ["unclear"] * 3


def test_headers_no_key_opens_make_no_request_and_fail_at_the_window_end(
        gw, gw_app, ks, api, clock):
    """A connection sealed with a key since removed: its send is never made without its
    headers (nor its check asked), so the send is retried with its key and fails at the
    window's end; never unknown, never a person's review for a request that did not go."""
    ks.gateway.sender.rand = lambda: 1.0
    connection(gw, api.url, retry_window_seconds=10, check=CHECK)
    with ks.database.engine.begin() as conn:
        conn.execute(update(connections).values(
            sealed=Fernet(Fernet.generate_key()).encrypt(b"{}").decode()))
    running = ks.gateway.start_relay(ks.settings, "shut-relay")
    try:
        assert send(gw, wait=0)[0] == 202
        deadline = time.monotonic() + 10
        while not rows(gw_app, send_attempts) and time.monotonic() < deadline:
            time.sleep(0.05)
        [row] = rows(gw_app, sends)
        assert row["state"] == "queued" and row["unknown"] == 0, row
        assert row["last_error"] == sender_module.HEADERS_SHUT
        clock.advance(11)
        ks.gateway.wake_sender()
        status, body, _ = gw.get("/v1/keys", scope="billing", key="k1", wait=10)
    finally:
        running.stop(5)
    assert body["record"]["state"] == "failed", body
    assert api.requests() == 0 and api.requests(method="GET") == 0
    assert {a["class"] for a in rows(gw_app, send_attempts)} == {"retry"}
    assert rows(gw_app, record_checks) == [] and rows(gw_app, reviews) == []


def test_the_window_ends_failed_after_retries(gw, gw_app, ks, api, clock):
    ks.gateway.sender.rand = lambda: 1.0  # the next try 1 s, 2 s... later (the test's clock)
    connection(gw, api.url, retry_window_seconds=10)
    for n in range(1, 20):
        api.script(answer(503), n=n)
    running = ks.gateway.start_relay(ks.settings, "window-relay")
    try:
        assert send(gw, wait=0)[0] == 202
        api.wait_for(created=0, requests=1, timeout=10)
        clock.advance(11)
        ks.gateway.wake_sender()
        status, body, _ = gw.get("/v1/keys", scope="billing", key="k1", wait=10)
    finally:
        running.stop(5)
    assert body["record"]["state"] == "failed", body
    result = body["record"]["result"]
    assert result["error"] == "status 503" and result["status_code"] == 503  # the last answer
    assert result["body"]["error"]["type"] == "scripted"
    [row] = rows(gw_app, sends)
    assert row["state"] == "failed" and row["sealed"] is None


def test_the_window_ends_unresolved_after_an_unknown_attempt(gw, gw_app, ks, api, clock):
    ks.gateway.sender.rand = lambda: 1.0
    dedupe = Downstream(dedupe_header="Idempotency-Key").start()
    try:
        connection(gw, dedupe.url, retry_window_seconds=10,
                   idempotency_header="Idempotency-Key")
        for n in range(1, 20):
            dedupe.script(answer(500), n=n)  # unknown: retried, the API dedupes
        running = ks.gateway.start_relay(ks.settings, "window-relay")
        try:
            assert send(gw, wait=0)[0] == 202
            dedupe.wait_for(created=0, requests=1, timeout=10)
            clock.advance(11)
            ks.gateway.wake_sender()
            status, body, _ = gw.get("/v1/keys", scope="billing", key="k1", wait=10)
        finally:
            running.stop(5)
    finally:
        dedupe.close()
    assert body["record"]["state"] == "needs_reconciliation", body
    assert [(r["kind"], r["state"]) for r in rows(gw_app, reviews)] == \
        [("send_unknown", "open")]
    assert rows(gw_app, sends)[0]["state"] == "unresolved"


@pytest.mark.parametrize("deduped", [False, True])
def test_a_sender_that_stopped_mid_request_is_taken_over_as_unknown(
        gw, gw_app, ks, api, clock, deduped):
    header = "Idempotency-Key" if deduped else None
    target = Downstream(dedupe_header=header).start() if deduped else api
    try:
        connection(gw, target.url, idempotency_header=header)
        assert send(gw, wait=0)[0] == 202
        [taken] = ks.gateway.sender.take("a-sender-that-died", 4)  # and never settled
        assert taken.send.state == "sending"
        clock.advance(2 + 16)  # its lease: the timeout + 15 s
        running = ks.gateway.start_relay(ks.settings, "taking-over")
        try:
            status, body, _ = gw.get("/v1/keys", scope="billing", key="k1", wait=10)
        finally:
            running.stop(5)
        state = body["record"]["state"]
        if deduped:  # the same key again: the API made it once
            assert state == "succeeded" and target.requests() == 1, body
        else:  # never a blind retry: a person decides
            assert state == "needs_reconciliation" and target.requests() == 0, body
        attempts = [r["class"] for r in rows(gw_app, send_attempts)]
        assert attempts[0] == "unknown"
    finally:
        if deduped:
            target.close()


def test_a_check_removed_while_a_send_waits_for_it_leaves_it_to_a_person(
        gw, gw_app, relay, api, clock, monkeypatch):
    monkeypatch.setattr(sender_module, "CHECK_BACKOFF_SECONDS", (600, 600, 600))
    connection(gw, api.url, timeout_seconds=1, check=CHECK)
    api.script(stall(3), n=1)
    api.script(answer(503), n=1, method="GET")  # unclear: the next try in 600 s
    assert send(gw, wait=0)[0] == 202
    api.wait_for(created=1, requests=1, timeout=10)
    for _ in range(100):
        if rows(gw_app, sends)[0]["check_tries"] == 1:
            break
        time.sleep(0.05)
    assert rows(gw_app, sends)[0]["state"] == "checking"
    assert gw.client.patch("/v1/connections/billing", json={"check": None},
                           headers=gw._auth(...)).status_code == 200
    clock.advance(601)
    relay.wake_sender()
    status, body, _ = gw.get("/v1/keys", scope="billing", key="k1", wait=10)
    assert body["record"]["state"] == "needs_reconciliation", body
    assert rows(gw_app, sends)[0]["state"] == "unresolved"
    assert api.requests(method="GET") == 1
