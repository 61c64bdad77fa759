"""A destination's filter in the relay (issue 29, first part), both backends, against a sink
on loopback: an event the filter does not take is `filtered` when its turn comes (no
request, no attempt, its record succeeded with {"filtered": true}, the source's health and
last error untouched, the forwards metric counts it); a filter PATCHed while an event waits
applies to it; a redelivery sends a filtered event through the filter again."""
from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import select, update

from keystore_service.gateway.relay import Relay
from keystore_service.storage.tables import hook_attempts, hook_events

from .bulk_support import bulk, wait_for
from .support import HOLDER, count, create_source, deliver, delivery, pump

INVOICES = {"event_types": ["invoice.*"]}


def body(event_id: str, kind: str, **fields) -> bytes:
    return json.dumps({"id": event_id, "type": kind, **fields}).encode()


def send(gw, source: dict, event_id: str, kind: str, **fields) -> None:
    status, answer, _ = deliver(gw, source, body(event_id, kind, **fields), event_id=event_id)
    assert status == 202, answer


def set_filter(gw, sink, f) -> None:
    """The source's destination filter, by PATCH /v1/sources/shop (None: no filter)."""
    r = gw.client.patch("/v1/sources/shop", json={"destination": {"url": sink.url, "filter": f}},
                        headers=gw._auth(...))
    assert r.status_code == 200, r.get_json(silent=True)
    assert r.get_json()["source"]["destination"]["filter"] == f


def store_filter(gw_app, clock, f) -> None:
    """A filter written into the source's config as is, through the store (as a version of
    other limits may have left it: the API would refuse it)."""
    ks = gw_app.extensions["keystore"]
    store = ks.gateway.forwarding.sources
    source = store.named(ks.accounts.tenant_id("acme"), "shop")
    options = source.options
    options["forward"]["filter"] = f
    with store.transaction() as cur:
        store.change(cur, source, {"config": json.dumps(options)}, clock.now)


def turn(forwarding) -> list:
    """Relay rounds as the relay makes them (take, attempt, settle together) until nothing
    is due (max_in_flight bounds a round); the outcomes, sorted."""
    out: list = []
    while jobs := forwarding.take(HOLDER, 16):
        ended = forwarding.settle_many(HOLDER, [(j, forwarding.attempt(j)) for j in jobs])
        out += [ended[j.event.id].value for j in jobs if j.event.id in ended]
    return sorted(out)


def record(gw, event_id: str) -> dict:
    return gw.get("/v1/keys", scope="hook:shop", key=event_id)[1]["record"]


def got(sink) -> list[str]:
    return [json.loads(r["body"])["id"] for r in sink.requests]


def states(gw, state: str) -> list[str]:
    status, answer, _ = gw.get("/v1/deliveries", state=state)
    assert status == 200, answer
    return sorted(d["event_id"] for d in answer["deliveries"])


def test_by_type_invoices_go_and_a_customer_event_is_filtered(gw_app, gw, sink, forwarding,
                                                              clock):
    source = create_source(gw, gw.token, sink.url)
    set_filter(gw, sink, INVOICES)
    send(gw, source, "ev1", "invoice.paid")
    send(gw, source, "ev2", "customer.created")
    assert turn(forwarding) == ["delivered", "filtered"]
    assert turn(forwarding) == []  # nothing left: a filtered event is settled
    assert got(sink) == ["ev1"]  # the sink never got the filtered one
    d = delivery(gw, "ev2")
    assert d["state"] == "filtered" and d["attempts"] == [] and d["attempt_count"] == 0
    assert d["delivered_at"] is None and d["next_attempt_at"] is None and d["body_kept"]
    r = record(gw, "ev2")
    assert r["state"] == "succeeded" and r["result"] == {"filtered": True}
    assert states(gw, "filtered") == ["ev2"] and states(gw, "delivered") == ["ev1"]


def test_the_record_ends_with_its_history_and_no_attempt_row(gw_app, gw, sink, forwarding,
                                                             clock):
    source = create_source(gw, gw.token, sink.url)
    set_filter(gw, sink, INVOICES)
    send(gw, source, "ev1", "customer.created")
    accepted_at = clock.now
    clock.advance(1)
    assert turn(forwarding) == ["filtered"]
    assert count(gw_app, hook_attempts) == 0  # nothing was sent
    r = record(gw, "ev1")
    assert r["state"] == "succeeded" and r.get("lease_expires_at") is None
    with gw_app.extensions["keystore"].database.engine.connect() as conn:
        record_id = conn.execute(select(hook_events.c.record_id)).scalar_one()
    (line,) = gw_app.extensions["keystore"].service.records.attempt_history(record_id)
    assert (line["ending"], line["incarnation"], line["attempt"]) == ("succeeded", 1, 1)
    assert line["acquired_at"] == accepted_at and line["ended_at"] == accepted_at + 1_000_000


@pytest.mark.parametrize("condition, taken, refused", [
    ({"pointer": "/data/currency", "equals": "eur"}, {"data": {"currency": "eur"}},
     {"data": {"currency": "usd"}}),
    ({"pointer": "/amount", "in": [1250, 99]}, {"amount": 99}, {"amount": 1251}),
    ({"pointer": "/amount", "equals": 1250}, {"amount": 1250.0}, {"amount": "1250"}),
    ({"pointer": "/livemode", "exists": True}, {"livemode": None}, {}),
    ({"pointer": "/test", "exists": False}, {}, {"test": False}),
])
def test_by_pointer(gw_app, gw, sink, forwarding, clock, condition, taken, refused):
    source = create_source(gw, gw.token, sink.url)
    set_filter(gw, sink, {"match": [condition]})
    send(gw, source, "yes", "invoice.paid", **taken)
    send(gw, source, "no", "invoice.paid", **refused)
    assert turn(forwarding) == ["delivered", "filtered"]
    assert got(sink) == ["yes"]
    assert delivery(gw, "no")["state"] == "filtered"


def test_every_given_part_must_hold(gw_app, gw, sink, forwarding, clock):
    source = create_source(gw, gw.token, sink.url)
    set_filter(gw, sink, {"event_types": ["invoice.*", "charge.refunded"],
                                   "match": [{"pointer": "/amount", "in": [1, 2]},
                                             {"pointer": "/test", "exists": False}]})
    send(gw, source, "a", "invoice.paid", amount=1)  # every part holds
    send(gw, source, "b", "charge.refunded", amount=2)
    send(gw, source, "c", "customer.created", amount=1)  # not its type
    send(gw, source, "d", "invoice.paid", amount=3)  # not its amount
    send(gw, source, "e", "invoice.paid", amount=1, test=True)
    assert turn(forwarding) == ["delivered"] * 2 + ["filtered"] * 3
    assert sorted(got(sink)) == ["a", "b"] and states(gw, "filtered") == ["c", "d", "e"]


def test_forward_itself_makes_no_request_for_a_filtered_event(gw_app, gw, sink, forwarding,
                                                              clock):
    """support.pump calls forward(), not attempt(): it filters too."""
    source = create_source(gw, gw.token, sink.url)
    set_filter(gw, sink, INVOICES)
    send(gw, source, "ev1", "customer.created")
    assert pump(forwarding) == ["filtered"] and sink.requests == []


def test_the_sources_health_and_last_error_are_untouched(gw_app, gw, sink, forwarding, clock):
    sink.answer = lambda n, r: 500
    source = create_source(gw, gw.token, sink.url)
    send(gw, source, "ev1", "invoice.paid")
    assert turn(forwarding) == ["retry"]
    before = gw.get("/v1/sources/shop")[1]["source"]
    assert before["last_error"] == "HTTP 500"
    set_filter(gw, sink, {"event_types": ["nothing.*"]})
    send(gw, source, "ev2", "customer.created")
    clock.advance(3600)  # ev1 is due again: filtered now as well
    assert turn(forwarding) == ["filtered", "filtered"]
    after = gw.get("/v1/sources/shop")[1]["source"]
    assert (after["last_error"], after["last_error_at"], after["health"]) == (
        before["last_error"], before["last_error_at"], before["health"])
    assert len(sink.requests) == 1


def test_a_filter_changed_while_an_event_waits_applies_to_it(gw_app, gw, sink, forwarding,
                                                             clock):
    source = create_source(gw, gw.token, sink.url)
    send(gw, source, "ev1", "customer.created")
    send(gw, source, "ev2", "invoice.paid")
    set_filter(gw, sink, INVOICES)  # after they were accepted, before their turn
    assert turn(forwarding) == ["delivered", "filtered"]
    send(gw, source, "ev3", "customer.created")
    set_filter(gw, sink, None)  # taken away again before ev3's turn
    assert turn(forwarding) == ["delivered"]
    assert got(sink) == ["ev2", "ev3"]


def test_a_redelivered_filtered_event_is_filtered_again_then_delivered(gw_app, gw, sink,
                                                                       forwarding, clock):
    source = create_source(gw, gw.token, sink.url)
    set_filter(gw, sink, INVOICES)
    send(gw, source, "ev1", "customer.created")
    assert turn(forwarding) == ["filtered"]
    redeliver = {"source": "shop", "event_id": "ev1"}
    status, answer, _ = gw.post("/v1/deliveries/redeliver", redeliver)  # no force: none sent
    assert status == 202 and answer["delivery"]["state"] == "queued", answer
    assert record(gw, "ev1")["state"] == "in_progress"
    assert turn(forwarding) == ["filtered"]  # the filter still refuses it
    assert record(gw, "ev1")["result"] == {"filtered": True}
    set_filter(gw, sink, {"event_types": ["invoice.*", "customer.*"]})
    assert gw.post("/v1/deliveries/redeliver", redeliver)[0] == 202
    assert turn(forwarding) == ["delivered"]
    (request,) = sink.requests
    assert request["headers"]["Keystore-Attempt"] == "1"  # the filtered turns sent nothing
    assert delivery(gw, "ev1")["state"] == "delivered"
    assert record(gw, "ev1")["result"]["status_code"] == 200


def test_a_bulk_redelivery_takes_filtered_events(gw_app, gw, sink, forwarding, clock):
    source = create_source(gw, gw.token, sink.url)
    set_filter(gw, sink, INVOICES)
    for n in range(3):
        send(gw, source, f"c{n}", "customer.created")
    send(gw, source, "i0", "invoice.paid")
    assert turn(forwarding) == ["delivered"] + ["filtered"] * 3
    set_filter(gw, sink, None)
    status, answer, _ = bulk(gw, {"action": "redeliver", "filter": {"state": "filtered"}},
                             key="again")
    assert status == 202, answer
    job = wait_for(gw, answer["job"]["id"])
    assert (job["state"], job["done"], job["skipped"]) == ("done", 3, 0), job
    assert turn(forwarding) == ["delivered"] * 3
    assert sorted(got(sink)) == ["c0", "c1", "c2", "i0"]


def test_the_metric_counts_filtered_forwards(gw_app, gw, sink, forwarding, clock):
    from prometheus_client.parser import text_string_to_metric_families

    def filtered() -> float:
        text = gw_app.test_client().get("/metrics").get_data(as_text=True)
        return next((s.value for f in text_string_to_metric_families(text)
                     for s in f.samples if s.name == "keystore_hook_forwards_total"
                     and s.labels == {"tenant": "acme", "source": "shop",
                                      "destination": "default", "outcome": "filtered"}), 0.0)
    source = create_source(gw, gw.token, sink.url)
    set_filter(gw, sink, INVOICES)
    before = filtered()
    send(gw, source, "ev1", "customer.created")
    send(gw, source, "ev2", "customer.updated")
    send(gw, source, "ev3", "invoice.paid")
    assert turn(forwarding) == ["delivered", "filtered", "filtered"]
    assert filtered() == before + 2


def test_without_its_body_an_event_is_judged_by_its_type_alone(gw_app, gw, sink, forwarding,
                                                               clock):
    source = create_source(gw, gw.token, sink.url)
    send(gw, source, "ev1", "customer.created")
    send(gw, source, "ev2", "invoice.paid")
    with gw_app.extensions["keystore"].database.engine.begin() as conn:
        conn.execute(update(hook_events).values(body=None))  # as if it were no longer kept
    set_filter(gw, sink, {"event_types": ["invoice.*"],
                                   "match": [{"pointer": "/amount", "exists": True}]})
    assert turn(forwarding) == ["failed", "filtered"]
    assert delivery(gw, "ev1")["state"] == "filtered"
    (attempt,) = delivery(gw, "ev2")["attempts"]  # the match could not be read: as before
    assert attempt["error"] == "the body is no longer kept" and sink.requests == []


def test_a_stored_filter_that_cannot_be_read_holds_its_events(gw_app, gw, sink, forwarding,
                                                              clock):
    """Neither sent past the filter nor filtered unseen: retried, with the reason."""
    source = create_source(gw, gw.token, sink.url)
    store_filter(gw_app, clock, {"event_types": []})
    send(gw, source, "ev1", "invoice.paid")
    assert turn(forwarding) == ["retry"]
    (attempt,) = delivery(gw, "ev1")["attempts"]
    assert attempt["error"].startswith("the source's stored filter cannot be used: "
                                       "filter.event_types: must not be empty")
    assert sink.requests == [] and delivery(gw, "ev1")["state"] == "queued"


def test_a_filtered_settle_after_the_lease_was_taken_over_writes_nothing(gw_app, gw, sink,
                                                                         forwarding, clock):
    source = create_source(gw, gw.token, sink.url)
    set_filter(gw, sink, INVOICES)
    send(gw, source, "ev1", "customer.created")
    (job,) = forwarding.take(HOLDER, 1)
    clock.advance(60)  # its lease (the timeout + 15 s) ran out; another relay takes it over
    (again,) = forwarding.take("other-relay", 1)
    assert forwarding.settle(job, HOLDER, forwarding.attempt(job)) is None
    assert delivery(gw, "ev1")["state"] == "delivering"
    assert forwarding.settle(again, "other-relay", forwarding.attempt(again)).value == \
        "filtered"
    assert delivery(gw, "ev1")["attempt_count"] == 1  # the lost take's count stays


def test_a_running_relay_filters(gw_app, gw, sink, clock):
    ks = gw_app.extensions["keystore"]
    forwarding = ks.gateway.forwarding
    source = create_source(gw, gw.token, sink.url)
    set_filter(gw, sink, INVOICES)
    send(gw, source, "ev1", "customer.created")
    send(gw, source, "ev2", "invoice.paid")
    relay = Relay(forwarding, 4, "filter-relay").start()
    try:
        deadline = time.monotonic() + 15
        while states(gw, "queued") + states(gw, "delivering") and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        relay.stop()
    assert states(gw, "filtered") == ["ev1"] and states(gw, "delivered") == ["ev2"]
    assert got(sink) == ["ev2"]


def test_a_filtered_events_body_is_dropped_its_keep_time_after_acceptance(gw_app, gw, sink,
                                                                          forwarding, clock):
    source = create_source(gw, gw.token, sink.url, keep_body_seconds=3600)
    set_filter(gw, sink, INVOICES)
    send(gw, source, "ev1", "customer.created")
    assert turn(forwarding) == ["filtered"]
    jobs = gw_app.extensions["keystore"].jobs
    clock.advance(3599)
    jobs.sweep()
    assert delivery(gw, "ev1")["body_kept"] is True
    clock.advance(1)
    jobs.sweep()
    assert delivery(gw, "ev1")["body_kept"] is False  # else a filter dropping most keeps all
    status, answer, _ = gw.post("/v1/deliveries/redeliver", {"source": "shop",
                                                             "event_id": "ev1"})
    assert status == 409 and answer["error"]["code"] == "body_dropped", answer
