"""What the ordering tests share (tests/gateway/test_ordering.py, test_serial.py): an event
of a key put through the ingest, the relay's rounds by hand, what the sink got, and a PATCH
of the destination's ordering."""
from __future__ import annotations

import json

from .support import HOLDER, deliver

ORDERING = {"key": "/data/id", "mode": "newer_wins", "version": "/data/v"}


def put(gw, source, event_id: str, data) -> None:
    body = json.dumps({"id": event_id, "type": "invoice.updated", "data": data}).encode()
    status, answer, _ = deliver(gw, source, body, event_id=event_id)
    assert status == 202, answer


def turn(forwarding) -> list:
    """Relay rounds as the relay makes them (take, attempt, settle together) until nothing
    is due; the outcomes, sorted. Events taken in one round are screened together."""
    out: list = []
    while jobs := forwarding.take(HOLDER, 16):
        ended = forwarding.settle_many(HOLDER, [(j, forwarding.attempt(j)) for j in jobs])
        out += [ended[j.event.id].value for j in jobs if j.event.id in ended]
    return sorted(out)


def got(sink) -> list[str]:
    return [json.loads(r["body"])["id"] for r in sink.requests]


def listed(gw) -> dict[str, tuple]:
    """Each delivery's (state, waiting_on), by event id."""
    status, answer, _ = gw.get("/v1/deliveries", limit=100)
    assert status == 200, answer
    return {d["event_id"]: (d["state"], d["waiting_on"]) for d in answer["deliveries"]}


def set_ordering(gw, sink, ordering=ORDERING, **extra) -> None:
    r = gw.client.patch("/v1/sources/shop", json={
        "destination": {"url": sink.url, "ordering": ordering}, **extra},
        headers=gw._auth(...))
    assert r.status_code == 200, r.get_json(silent=True)
