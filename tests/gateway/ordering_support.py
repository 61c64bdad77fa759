"""What the ordering tests share (tests/gateway/test_ordering.py, test_serial.py): an event
of a key put through the ingest, the relay's rounds by hand, what the sink got, a PATCH
of the destination's ordering, and a service with two real `keystore relay` processes."""
from __future__ import annotations

import json
import time
from pathlib import Path

from keystore_service.app import create_app
from keystore_service.settings import Settings
from tests.faults.gateway_harness import RelayProcess
from tests.support import Http

from .support import HOLDER, KEY, deliver

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


def relay_service(database_url: str, tmp_path: Path) -> tuple:
    """The service on `database_url` with tenant acme, an operator's Http to it, and two
    `keystore relay` processes (4 forwards each at once) not started yet: (ks, http, relays).
    The caller disposes of ks.database.engine."""
    app = create_app(Settings(database_url=database_url, secret_key=KEY,
                              token_cache_seconds=0, hook_rate_limit_per_second=0))
    ks = app.extensions["keystore"]
    now = int(time.time() * 1_000_000)
    ks.accounts.create_tenant("acme", now)
    http = Http(app.test_client(), ks.accounts.create_token("acme", "operator", None, now))
    env = {"KEYSTORE_SECRET_KEY": KEY, "KEYSTORE_RECONCILE_INTERVAL_SECONDS": "0"}
    relays = [RelayProcess(database_url, env, tmp_path / f"relay{i}.log", concurrency=4)
              for i in range(2)]
    return ks, http, relays
