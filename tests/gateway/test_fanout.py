"""Several destinations per source (issue 29, "Routing: several destinations"; migration
0023), both backends, against real sinks on loopback: each accepted event is one delivery per
destination with its own state, attempts and redelivery; the record succeeds once every
delivery is delivered, filtered or superseded, and fails at the first one given up; a
destination's own headers and signing secret go only to it; the list is changed by name."""
from __future__ import annotations

import json
import threading
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from standardwebhooks.webhooks import Webhook

from keystore_service.storage.route_tables import hook_destinations
from keystore_service.storage.tables import hook_events

from .bulk_support import bulk, wait_for
from .support import HOLDER, SECRET, STANDARD_SECRET, Sink, count, deliver, pump

E, D = hook_events.c, hook_destinations.c


def send(gw, source: dict, event_id: str, kind: str = "invoice.paid") -> None:
    body = json.dumps({"id": event_id, "type": kind}).encode()
    status, answer, _ = deliver(gw, source, body, event_id=event_id)
    assert status == 202, answer


def record(gw, event_id: str) -> dict:
    return gw.get("/v1/keys", scope="hook:shop", key=event_id)[1]["record"]


def deliveries(gw, event_id: str) -> dict[str, str]:
    status, body, _ = gw.get("/v1/deliveries", event_id=event_id)
    assert status == 200, body
    return {d["destination"]: d["state"] for d in body["deliveries"]}


def two(gw, sinks, first=None, second=None, **extra) -> dict:
    status, answer, _ = gw.post("/v1/sources", {
        "name": "shop", "provider": "testing", "secrets": [SECRET], "destinations": [
            {"name": "billing", "url": sinks[0].url, **(first or {})},
            {"name": "crm", "url": sinks[1].url, **(second or {})}], **extra})
    assert status == 201, answer
    return answer["source"]


def test_every_event_goes_to_each_destination_and_its_record_waits_for_both(gw, sinks,
                                                                          forwarding, clock):
    sinks[1].answer = lambda n, r: 500 if n == 0 else 200
    source = two(gw, sinks)
    assert [d["name"] for d in source["destinations"]] == ["billing", "crm"]
    assert source["destination"]["url"] == sinks[0].url  # v1.1: the first
    send(gw, source, "ev1")
    assert sorted(pump(forwarding)) == ["delivered", "retry"]
    assert deliveries(gw, "ev1") == {"billing": "delivered", "crm": "queued"}
    assert record(gw, "ev1")["state"] == "in_progress"  # crm has not delivered yet
    clock.advance(1.01)
    assert pump(forwarding) == ["delivered"]
    assert record(gw, "ev1")["state"] == "succeeded"
    assert [len(s.requests) for s in sinks] == [1, 2]
    assert {r["headers"]["Idempotency-Key"] for s in sinks for r in s.requests} == {"ev1"}


def test_filters_route_by_type_and_an_event_no_one_takes_is_filtered(gw, sinks, forwarding):
    source = two(gw, sinks, {"filter": {"event_types": ["invoice.*"]}},
                 {"filter": {"event_types": ["customer.*"]}})
    for n, kind in enumerate(["invoice.paid", "customer.created", "charge.refunded"]):
        send(gw, source, f"ev{n}", kind)
    while pump(forwarding):
        pass
    assert deliveries(gw, "ev0") == {"billing": "delivered", "crm": "filtered"}
    assert deliveries(gw, "ev1") == {"billing": "filtered", "crm": "delivered"}
    assert deliveries(gw, "ev2") == {"billing": "filtered", "crm": "filtered"}
    assert [json.loads(r["body"])["type"] for r in sinks[0].requests] == ["invoice.paid"]
    assert [json.loads(r["body"])["type"] for r in sinks[1].requests] == ["customer.created"]
    for n in range(3):
        assert record(gw, f"ev{n}")["state"] == "succeeded"
    assert record(gw, "ev2")["result"] == {"filtered": True}
    status, body, _ = gw.get("/v1/deliveries", destination="crm", state="filtered")
    assert [d["event_id"] for d in body["deliveries"]] == ["ev2", "ev0"]


def test_filters_route_by_pointer_too(gw, sinks, forwarding):
    """billing takes euro amounts of 100 or more (two parts, both must hold), crm any event
    with a customer: each event goes where its body says, and one neither takes is
    filtered everywhere."""
    source = two(gw, sinks, {"filter": {"match": [
        {"pointer": "/data/currency", "equals": "eur"},
        {"pointer": "/data/amount", "in": [100, 250, 1000]}]}},
        {"filter": {"match": [{"pointer": "/data/customer", "exists": True}]}})
    bodies = {"ev0": {"currency": "eur", "amount": 250},
              "ev1": {"currency": "eur", "amount": 5, "customer": "cus_1"},
              "ev2": {"currency": "usd", "amount": 250},
              "ev3": {"currency": "eur", "amount": 1000, "customer": None}}
    for event_id, data in bodies.items():
        body = json.dumps({"id": event_id, "type": "charge", "data": data}).encode()
        status, answer, _ = deliver(gw, source, body, event_id=event_id)
        assert status == 202, answer
    while pump(forwarding):
        pass
    assert {e: deliveries(gw, e) for e in bodies} == {
        "ev0": {"billing": "delivered", "crm": "filtered"},
        "ev1": {"billing": "filtered", "crm": "delivered"},
        "ev2": {"billing": "filtered", "crm": "filtered"},
        "ev3": {"billing": "delivered", "crm": "delivered"}}  # null exists
    assert [json.loads(r["body"])["id"] for r in sinks[0].requests] == ["ev0", "ev3"]
    assert all(record(gw, e)["state"] == "succeeded" for e in bodies)


def test_one_failing_for_good_fails_the_record_and_is_redelivered_on_its_own(
        gw, sinks, forwarding):
    sinks[1].answer = lambda n, r: 400 if n == 0 else 200
    source = two(gw, sinks)
    send(gw, source, "ev1")
    assert sorted(pump(forwarding)) == ["delivered", "failed"]
    assert record(gw, "ev1")["state"] == "failed"
    (review,) = gw.get("/v1/reviews", kind="delivery_failed")[1]["reviews"]
    status, body, _ = gw.post("/v1/deliveries/redeliver", {"source": "shop",
                                                           "event_id": "ev1"})
    assert status == 400 and body["error"]["details"]["field"] == "destination"
    assert "billing, crm" in body["error"]["message"]
    status, body, _ = gw.post("/v1/deliveries/redeliver", {"source": "shop", "event_id": "ev1",
                                                           "destination": "nope"})
    assert status == 404
    status, body, _ = gw.post("/v1/deliveries/redeliver", {"source": "shop", "event_id": "ev1",
                                                           "destination": "crm"})
    assert status == 202 and body["delivery"]["destination"] == "crm"
    assert deliveries(gw, "ev1") == {"billing": "delivered", "crm": "queued"}
    assert record(gw, "ev1")["state"] == "in_progress"
    assert pump(forwarding) == ["delivered"]
    assert record(gw, "ev1")["state"] == "succeeded"
    assert [len(s.requests) for s in sinks] == [1, 2]  # billing was not sent again
    assert gw.get("/v1/reviews", kind="delivery_failed")[1]["reviews"] == []


def test_a_review_redelivers_the_failed_delivery_only(gw, sinks, forwarding):
    sinks[0].answer = lambda n, r: 410 if n == 0 else 200
    source = two(gw, sinks)
    send(gw, source, "ev1")
    pump(forwarding)
    (review,) = gw.get("/v1/reviews", kind="delivery_failed")[1]["reviews"]
    status, body, _ = gw.post("/v1/resolve", {"scope": "hook:shop", "key": "ev1",
                                              "action": "redeliver",
                                              "review_id": review["id"]})
    assert status == 200, body
    assert deliveries(gw, "ev1") == {"billing": "queued", "crm": "delivered"}
    assert pump(forwarding) == ["delivered"]
    assert record(gw, "ev1")["state"] == "succeeded"


def test_a_repeat_makes_no_second_delivery(gw_app, gw, sinks, forwarding):
    source = two(gw, sinks)
    send(gw, source, "ev1")
    body = json.dumps({"id": "ev1", "type": "invoice.paid"}).encode()
    status, answer, _ = deliver(gw, source, body, event_id="ev1")
    assert status == 200 and answer["status"] == "duplicate"
    assert count(gw_app, hook_events) == 2
    while pump(forwarding):
        pass
    assert [len(s.requests) for s in sinks] == [1, 1]


def test_each_destination_has_its_own_headers_and_secret(gw, sinks, forwarding):
    source = two(gw, sinks, {"headers": {"X-Team": "billing"}},
                 {"headers": {"X-Team": "crm"}, "secret": STANDARD_SECRET})
    assert [(d["header_names"], d["has_secret"]) for d in source["destinations"]] == [
        (["X-Team"], False), (["X-Team"], True)]
    send(gw, source, "ev1")
    pump(forwarding)
    (a,), (b,) = sinks[0].requests, sinks[1].requests
    assert a["headers"]["X-Team"] == "billing" and "webhook-signature" not in {
        k.lower() for k in a["headers"]}
    assert b["headers"]["X-Team"] == "crm"
    low = {k.lower(): v for k, v in b["headers"].items()}
    assert low["webhook-signature"] == Webhook(STANDARD_SECRET).sign(
        low["webhook-id"], datetime.fromtimestamp(int(low["webhook-timestamp"]), UTC),
        b["body"].decode())


def test_the_list_is_changed_by_name(gw_app, gw, sinks, forwarding):
    two(gw, sinks, second={"max_in_flight": 2})
    third = Sink()
    try:
        status, body, _ = gw.patch("/v1/sources/shop", {"destinations": [
            {"name": "billing", "url": sinks[0].url},
            {"name": "crm", "url": third.url, "filter": {"event_types": ["a.*"]}},
            {"name": "audit", "url": sinks[1].url}]})
        assert status == 200, body
        got = {d["name"]: d for d in body["source"]["destinations"]}
        assert got["crm"]["url"] == third.url and got["crm"]["max_in_flight"] == 2
        assert got["crm"]["filter"] == {"event_types": ["a.*"]}
        assert list(got) == ["billing", "crm", "audit"]
        # audit has no delivery yet: it may go; the first stays always
        status, body, _ = gw.patch("/v1/sources/shop", {"destinations": [
            {"name": "billing", "url": sinks[0].url}, {"name": "crm", "url": third.url}]})
        assert status == 200 and len(body["source"]["destinations"]) == 2
        status, body, _ = gw.patch("/v1/sources/shop", {"destinations": [
            {"name": "crm", "url": third.url}]})
        assert status == 400 and "'billing'" in body["error"]["message"]
        send(gw, gw.get("/v1/sources/shop")[1]["source"], "a1", "a.b")
        status, body, _ = gw.patch("/v1/sources/shop", {"destinations": [
            {"name": "billing", "url": sinks[0].url}]})
        assert status == 400 and "'crm' has deliveries" in body["error"]["message"]
        assert count(gw_app, hook_destinations) == 2  # the refusal changed nothing
        while pump(forwarding):
            pass
        assert len(third.requests) == 1 and len(sinks[1].requests) == 0
    finally:
        third.close()


@pytest.mark.parametrize("given, field", [
    ({"destinations": [{"name": "a", "url": "http://127.0.0.1:9/"}] * 2}, "destinations[1]"),
    ({"destinations": [{"name": f"d{i}", "url": "http://127.0.0.1:9/"} for i in range(11)]},
     "destinations"),
    ({"destinations": []}, "destinations"),
    ({"destinations": [{"name": "a", "url": "http://127.0.0.1:9/"}],
      "destination": {"url": "http://127.0.0.1:9/"}}, "destinations"),
    ({}, "destination"),
    ({"destinations": [{"name": "a", "url": "http://127.0.0.1:9/"},
                       {"name": "b", "url": "http://127.0.0.1:9/",
                        "filter": {"match": [{"pointer": "x", "exists": True}]}}]},
     "destinations[1].filter"),
    ({"destinations": [{"name": "a", "url": "http://127.0.0.1:9/"},
                       {"name": "b", "url": "http://127.0.0.1:9/", "rate": {"per_hour": 1}}]},
     "destinations[1].rate"),
    ({"destinations": [{"name": "A b", "url": "http://127.0.0.1:9/"}]}, "destinations"),
    ({"destinations": [{"name": "a", "url": "http://169.254.169.254/"}]},
     "destinations.0.url"),
])
def test_a_list_that_cannot_be_used_is_refused_and_nothing_is_made(gw_app, gw, given, field):
    body = {"name": "shop", "provider": "testing", "secrets": [SECRET]} | given
    status, answer, _ = gw.post("/v1/sources", body)
    assert status == 400, answer
    assert field in json.dumps(answer["error"])
    assert count(gw_app, hook_destinations) == 0


def test_deliveries_that_end_at_once_end_the_record_once_both_did(gw_app, gw, sinks,
                                                                  forwarding):
    """Two relays' settles of one record's two deliveries, in two threads at the same
    moment, twenty times: the later always sees the earlier's end (the record's row is
    locked before the deliveries are read), so no record stays in progress."""
    source = two(gw, sinks, max_in_flight=100)
    for n in range(20):
        send(gw, source, f"ev{n}")
    taken = forwarding.take(HOLDER, 100)
    assert len(taken) == 40
    for n in range(20):
        jobs = [j for j in taken if j.event.event_id == f"ev{n}"]
        assert len(jobs) == 2, n
        results = [forwarding.forward(j) for j in jobs]
        start = threading.Barrier(2)

        def settle(i: int) -> None:
            start.wait()
            forwarding.settle(jobs[i], HOLDER, results[i])
        threads = [threading.Thread(target=settle, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert record(gw, f"ev{n}")["state"] == "succeeded", n
    with gw_app.extensions["keystore"].database.engine.connect() as conn:
        assert set(conn.execute(select(E.state)).scalars()) == {"delivered"}


def test_an_operators_pause_holds_every_destination_and_ends_on_all(gw, sinks, forwarding,
                                                                   clock):
    source = two(gw, sinks)
    status, body, _ = gw.post("/v1/sources/shop/pause", {"reason": "maintenance"})
    assert status == 200, body
    send(gw, source, "ev1")
    assert forwarding.take(HOLDER, 10) == []  # neither destination forwards
    assert {d["name"]: d["paused_until"] for d in body["source"]["destinations"]} == {
        "billing": None, "crm": None}  # an operator's pause is not a Retry-After one
    status, body, _ = gw.post("/v1/sources/shop/resume")
    assert status == 200 and body["source"]["paused"] is None
    assert sorted(pump(forwarding)) == ["delivered", "delivered"]
    assert record(gw, "ev1")["state"] == "succeeded"


def test_a_retry_after_pauses_only_its_destination(gw, sinks, forwarding, clock):
    sinks[1].answer = lambda n, r: (503, {"Retry-After": "60"}) if n == 0 else 200
    source = two(gw, sinks)
    send(gw, source, "ev1")
    assert sorted(pump(forwarding)) == ["delivered", "retry"]
    send(gw, source, "ev2")
    assert pump(forwarding) == ["delivered"]  # billing's; crm waits out its pause
    assert deliveries(gw, "ev2") == {"billing": "delivered", "crm": "queued"}
    got = {d["name"]: d for d in gw.get("/v1/sources/shop")[1]["source"]["destinations"]}
    assert got["billing"]["paused_until"] is None and got["crm"]["paused_until"] is not None
    assert got["crm"]["last_error"] == "HTTP 503" and got["crm"]["health"] == "failing"
    clock.advance(61)
    assert sorted(pump(forwarding)) == ["delivered", "delivered"]
    assert [record(gw, e)["state"] for e in ("ev1", "ev2")] == ["succeeded", "succeeded"]


def test_a_bulk_redelivery_takes_a_destination_and_leaves_the_others(gw, sinks, forwarding):
    sinks[1].answer = lambda n, r: 400 if n < 3 else 200
    source = two(gw, sinks, max_in_flight=10)
    for n in range(3):
        send(gw, source, f"ev{n}")
    while pump(forwarding):
        pass
    status, body, _ = bulk(gw, {"action": "redeliver", "dry_run": True,
                                "filter": {"destination": "crm", "state": "failed"}})
    assert status == 200 and body["matched"] == 3
    assert bulk(gw, {"action": "redeliver", "dry_run": True,
                     "filter": {"destination": "billing", "state": "failed"}})[1] == {
        "matched": 0}
    status, body, _ = bulk(gw, {"action": "redeliver",
                                "filter": {"destination": "crm", "state": "failed"}})
    assert status == 202, body
    assert wait_for(gw, body["job"]["id"])["done"] == 3
    while pump(forwarding):
        pass
    assert [len(s.requests) for s in sinks] == [3, 6]  # billing got each once
    assert {record(gw, f"ev{n}")["state"] for n in range(3)} == {"succeeded"}


@pytest.mark.parametrize("name", ["a\nb", "A", "x" * 65, "%61", "ü", ""])
def test_a_destination_name_that_no_destination_can_have_is_400(gw, sinks, forwarding, name):
    two(gw, sinks)
    if name:
        status, body, _ = gw.get("/v1/deliveries", destination=name)
        assert status == 400 and body["error"]["code"] == "invalid_request", body
    for path in ("/v1/deliveries/redeliver", "/v1/deliveries/retry"):
        status, body, _ = gw.post(path, {"source": "shop", "event_id": "ev1",
                                         "destination": name})
        assert status == 400 and "destination" in json.dumps(body["error"]), body
    status, body, _ = gw.patch("/v1/sources/shop", {"destinations": [
        {"name": "billing", "url": sinks[0].url}, {"name": name, "url": sinks[1].url}]})
    assert status == 400, body
    assert [d["name"] for d in gw.get("/v1/sources/shop")[1]["source"]["destinations"]] == [
        "billing", "crm"]


def test_a_name_of_another_source_or_tenant_finds_nothing(gw_app, gw, op, sinks, forwarding):
    source = two(gw, sinks)
    send(gw, source, "ev1")
    status, body, _ = gw.get("/v1/deliveries", destination="crm", token=op["globex"])
    assert status == 200 and body["deliveries"] == []  # another tenant's crm is not seen
    status, body, _ = gw.post("/v1/deliveries/redeliver", {
        "source": "shop", "event_id": "ev1", "destination": "crm"}, token=op["globex"])
    assert status == 404, body
    assert len(gw.get("/v1/deliveries", destination="crm")[1]["deliveries"]) == 1
    status, body, _ = gw.get("/v1/deliveries", destination="nope")
    assert status == 200 and body["deliveries"] == []
