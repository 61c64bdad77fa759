"""POST /hooks/<id> by docs/webhooks/README.md's table, on both backends, and the event's record."""
from __future__ import annotations

import json
import threading
import time

import pytest
import requests

from keystore_service.storage.tables import hook_events, records

from .support import BODY, count, create_source, deliver, signed


def test_events_that_arrive_together_are_each_answered_as_alone(gw_app, gw, sink, backend):
    """16 deliveries at once, 8 events twice each: one 202 and one duplicate per event, one
    record and one event row each; on SQLite in fewer transactions than deliveries (on
    PostgreSQL each new event is one statement of its own)."""
    source = create_source(gw, gw.token, sink.url)
    path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
    start = threading.Barrier(16, timeout=10)
    answers: list[tuple[int, int, str]] = []
    groups = gw_app.extensions["keystore"].gateway.ingest.groups
    if groups is not None:  # SQLite: the first statement waits until the others queued
        many, first = groups._many, threading.Event()

        def held(items):  # on a loaded machine the 16 threads may otherwise come one by one
            if not first.is_set():
                first.set()
                deadline = time.monotonic() + 10
                while len(groups._queue) < 15 and time.monotonic() < deadline:
                    time.sleep(0.005)
            return many(items)
        groups._many = held

    def send(n: int) -> None:
        client = gw_app.test_client()
        body = json.dumps({"id": n % 8}).encode()
        start.wait()
        r = client.post(path, data=body, headers=signed(body, f"evt_{n % 8}"))
        answers.append((n % 8, r.status_code, r.get_json()["status"]))
    threads = [threading.Thread(target=send, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(answers) == sorted([(n, 200, "duplicate") for n in range(8)]
                                     + [(n, 202, "accepted") for n in range(8)])
    assert count(gw_app, hook_events) == 8 and count(gw_app, records) == 8
    if backend == "sqlite":  # the 15 queued went in the next two groups (a key once each)
        assert groups.members == 16 and groups.groups == 3
    else:
        assert groups is None


def test_new_duplicate_and_held(gw_app, gw, sink):
    source = create_source(gw, gw.token, sink.url)
    assert source["ingest_url"].startswith("http://localhost/hooks/")
    assert len(source["ingest_url"].rsplit("/", 1)[1]) >= 32
    status, body, _ = deliver(gw, source)
    assert (status, body) == (202, {"status": "accepted", "event_id": "evt_1"})
    status, body, headers = deliver(gw, source)
    assert (status, body["status"]) == (200, "duplicate")
    assert headers["Idempotent-Replayed"] == "true"
    changed = json.dumps({"id": "evt_1", "amount": 9999}).encode()
    status, body, headers = deliver(gw, source, changed)
    assert (status, body["status"]) == (200, "held") and "Idempotent-Replayed" not in headers
    assert count(gw_app, hook_events) == 1
    status, record, _ = gw.get("/v1/keys", scope="hook:shop", key="evt_1")
    assert record["record"]["state"] == "in_progress"
    assert record["record"]["duplicate_count"] == 1
    status, queue, _ = gw.get("/v1/reviews")
    (review,) = queue["reviews"]
    assert review["kind"] == "fingerprint_mismatch" and review["scope"] == "hook:shop"


def test_whitespace_and_key_order_are_the_same_body(gw, sink):
    source = create_source(gw, gw.token, sink.url)
    assert deliver(gw, source)[0] == 202
    same = b'{ "amount": 1250,\n "id": "evt_1" }'
    assert deliver(gw, source, same)[1]["status"] == "duplicate"


@pytest.mark.parametrize("case", ["no signature", "wrong secret", "tampered"])
def test_a_bad_signature_is_401_with_nothing_stored(gw_app, gw, sink, case):
    source = create_source(gw, gw.token, sink.url)
    path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
    headers = {"no signature": {"X-Test-Id": "e"},
               "wrong secret": signed(BODY, "e", secret="other"),
               "tampered": signed(BODY + b" ", "e")}[case]
    r = gw.client.post(path, data=BODY if case != "tampered" else BODY + b"  ",
                       headers=headers)
    assert r.status_code == 401 and r.get_json()["error"]["code"] == "invalid_signature"
    assert count(gw_app, records) == 0 and count(gw_app, hook_events) == 0


def test_no_event_id_is_400_and_unknown_sources_404(gw_app, gw, sink):
    source = create_source(gw, gw.token, sink.url)
    status, body, _ = deliver(gw, source, event_id=None)
    assert status == 400 and body["error"]["code"] == "invalid_request"
    for path in ("/hooks/" + "x" * 43, "/hooks/" + "x" * 500, "/hooks/%C3%A9"):
        r = gw.client.post(path, data=BODY, headers=signed(BODY, "e"))
        assert r.status_code == 404 and r.get_json()["error"]["code"] == "not_found"
    assert count(gw_app, records) == 0


def test_a_disabled_source_answers_404_and_keeps_its_name(gw, sink):
    source = create_source(gw, gw.token, sink.url)
    status, body, _ = gw.client.delete("/v1/sources/shop",
                                       headers={"Authorization": f"Bearer {gw.token}"}), None, None
    assert status.status_code == 200 and status.get_json()["source"]["state"] == "disabled"
    assert deliver(gw, source)[0] == 404
    status, body, _ = gw.post("/v1/sources", {"name": "shop", "provider": "testing",
                                              "secrets": ["s"], "destination": {"url": sink.url}})
    assert status == 400 and body["error"]["details"]["field"] == "name"


def test_claims_in_hook_scopes_are_403_lookups_work(gw, op):
    for path, body in (("/v1/claim", {"scope": "hook:shop", "key": "k"}),
                       ("/v1/claim/batch", {"scope": "hook:shop", "items": [{"key": "k"}]}),
                       ("/v1/complete", {"scope": "hook:x", "key": "k", "lease_token": "lt",
                                         "state": "succeeded"}),
                       ("/v1/release", {"scope": "hook:x", "key": "k", "lease_token": "lt"}),
                       ("/v1/extend", {"scope": "hook:x", "key": "k", "lease_token": "lt",
                                       "lease_seconds": 5})):
        status, answer, _ = gw.post(path, body, token=op["client"])
        assert status == 403 and answer["error"]["code"] == "forbidden", path
    assert gw.get("/v1/keys", scope="hook:shop", key="k")[0] == 404


def test_sources_need_an_operator_and_stay_in_their_tenant(gw, op, sink):
    create_source(gw, gw.token, sink.url)
    assert gw.get("/v1/sources", token=op["client"])[0] == 403
    status, body, _ = gw.get("/v1/sources", token=op["globex"])
    assert status == 200 and body["sources"] == []
    assert gw.get("/v1/sources/shop", token=op["globex"])[0] == 404


def test_secrets_are_never_returned_and_not_readable_from_the_database(gw_app, gw, sink):
    source = create_source(gw, gw.token, sink.url,
                           destination={"url": sink.url, "headers": {"X-Auth": "hdr-s3cr3t"}})
    text = json.dumps(source)
    assert "test-secret-1" not in text and "hdr-s3cr3t" not in text
    assert source["secrets"] == 1 and source["destination"]["header_names"] == ["X-Auth"]
    ingest_id = source["ingest_url"].rsplit("/", 1)[1]
    with gw_app.extensions["keystore"].database.engine.connect() as conn:
        dump = repr([conn.exec_driver_sql(f"SELECT * FROM {t}").all()
                     for t in ("hook_sources", "hook_destinations")])
    for secret in ("test-secret-1", "hdr-s3cr3t", ingest_id):
        assert secret not in dump


def test_ttl_below_the_window_plus_a_day_is_400(gw, sink):
    status, body, _ = gw.post("/v1/sources", {
        "name": "short", "provider": "testing", "secrets": ["s"],
        "destination": {"url": sink.url}, "retry_window_seconds": 3600,
        "ttl_seconds": 3600 + 86_399})
    assert status == 400 and body["error"]["details"]["field"] == "ttl_seconds"


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/",
                                 "http://[fe80::1]/x", "http://[fd00:ec2::254]/",
                                 "ftp://127.0.0.1/x", "http://user:pw@127.0.0.1/x",
                                 "javascript:alert(1)", "http://127.0.0.1:99999/x"])
def test_refused_destinations(gw, url):
    status, body, _ = gw.post("/v1/sources", {"name": "bad", "provider": "testing",
                                              "secrets": ["s"], "destination": {"url": url}})
    assert status == 400, body


def test_the_sink_helper_is_reachable(sink):  # (a check of the test's own tool)
    assert requests.post(sink.url, data=b"{}", timeout=5).status_code == 200
