"""A source's destinations changed while ingest still has the old list in its cache (issue
29, "Routing: several destinations"; the cache lives KEYSTORE_TOKEN_CACHE_SECONDS, per
process), both backends, through the HTTP API: a destination removed makes the next event of
that worker 503 `unavailable` with nothing written, and its resend goes to the destinations
that remain; a destination added takes the events accepted once the cache has read it again,
never the earlier ones."""
from __future__ import annotations

import json

import pytest

from keystore_service.app import create_app
from keystore_service.settings import Settings
from keystore_service.storage.tables import hook_events

from .support import KEY, SECRET, count, deliver, pump

# The default of KEYSTORE_TOKEN_CACHE_SECONDS: how long a worker reuses a source it read.
CACHE_SECONDS = 5.0


@pytest.fixture
def ticks():
    """The ingest cache's clock (monotonic seconds), moved by hand."""
    return [1000.0]


@pytest.fixture
def gw_app(database_url, clock, ticks):
    """conftest's app, but with ingest's cache on (there it is 0), on the `ticks` clock."""
    app = create_app(Settings(database_url=database_url, secret_key=KEY,
                              token_cache_seconds=CACHE_SECONDS), clock)
    app.extensions["keystore"].gateway.ingest.monotonic = lambda: ticks[0]
    yield app
    app.extensions["keystore"].database.engine.dispose()


def hook(gw, source: dict, event_id: str) -> tuple[int, dict, dict]:
    body = json.dumps({"id": event_id, "type": "invoice.paid"}).encode()
    return deliver(gw, source, body, event_id=event_id)


def deliveries(gw, event_id: str) -> dict[str, str]:
    status, body, _ = gw.get("/v1/deliveries", event_id=event_id)
    assert status == 200, body
    return {d["destination"]: d["state"] for d in body["deliveries"]}


def destinations(gw, sinks, *names: str) -> dict:
    """PATCH the source `shop` to `names` (billing on sinks[0], any other on sinks[1])."""
    status, body, _ = gw.patch("/v1/sources/shop", {"destinations": [
        {"name": n, "url": sinks[0 if n == "billing" else 1].url} for n in names]})
    assert status == 200, body
    return body["source"]


def shop(gw, sinks) -> dict:
    status, body, _ = gw.post("/v1/sources", {
        "name": "shop", "provider": "testing", "secrets": [SECRET],
        "destinations": [{"name": "billing", "url": sinks[0].url}]})
    assert status == 201, body
    return body["source"]


def test_a_destination_removed_under_the_cache_is_503_then_the_resend_goes_to_the_rest(
        gw_app, gw, sinks, forwarding, ticks):
    source = shop(gw, sinks)
    assert hook(gw, source, "ev1")[0] == 202
    destinations(gw, sinks, "billing", "crm")
    ticks[0] += CACHE_SECONDS + 0.01
    status, body, _ = hook(gw, source, "ev1")  # a resend: the cache now lists crm
    assert (status, body["status"]) == (200, "duplicate")
    assert deliveries(gw, "ev1") == {"billing": "queued"}  # so crm has none: it may go
    destinations(gw, sinks, "billing")

    status, body, headers = hook(gw, source, "ev2")  # within the cache's life
    assert status == 503, body
    assert body["error"]["code"] == "unavailable" and "Retry-After" in headers
    text = json.dumps(body)
    assert "Traceback" not in text and source["ingest_url"].rsplit("/", 1)[1] not in text
    assert gw.get("/v1/keys", scope="hook:shop", key="ev2")[0] == 404  # no record
    assert count(gw_app, hook_events) == 1  # no delivery either: ev1's to billing only

    status, body, _ = hook(gw, source, "ev2")  # the worker dropped the stale list
    assert (status, body["status"]) == (202, "accepted"), body
    assert deliveries(gw, "ev2") == {"billing": "queued"}
    while pump(forwarding):
        pass
    assert [len(s.requests) for s in sinks] == [2, 0]
    assert gw.get("/v1/keys", scope="hook:shop", key="ev2")[1]["record"]["state"] == \
        "succeeded"


def test_a_destination_added_takes_the_events_after_the_cache_not_earlier_ones(
        gw, sinks, forwarding, ticks):
    source = shop(gw, sinks)
    assert hook(gw, source, "ev1")[0] == 202
    destinations(gw, sinks, "billing", "crm")
    assert hook(gw, source, "ev2")[0] == 202  # within the cache's life: the old list
    assert deliveries(gw, "ev2") == {"billing": "queued"}
    ticks[0] += CACHE_SECONDS + 0.01
    assert hook(gw, source, "ev3")[0] == 202
    assert deliveries(gw, "ev3") == {"billing": "queued", "crm": "queued"}
    status, body, _ = hook(gw, source, "ev1")  # a resend of an earlier one adds nothing
    assert (status, body["status"]) == (200, "duplicate")
    while pump(forwarding):
        pass
    assert deliveries(gw, "ev1") == {"billing": "delivered"}
    assert [json.loads(r["body"])["id"] for r in sinks[1].requests] == ["ev3"]
    assert sorted(json.loads(r["body"])["id"] for r in sinks[0].requests) == [
        "ev1", "ev2", "ev3"]


def test_a_name_removed_and_given_again_within_the_cache_is_a_new_destination(
        gw, sinks, forwarding, ticks, backend):
    """Its old row is gone and the cache still holds it. PostgreSQL never gives an id twice:
    503 once, then the new row. SQLite gives the new row the id of the removed one (the
    highest, plus one): the cached list names the new row, and the event goes to it."""
    source = shop(gw, sinks)
    assert hook(gw, source, "ev1")[0] == 202
    destinations(gw, sinks, "billing", "crm")
    ticks[0] += CACHE_SECONDS + 0.01
    assert hook(gw, source, "ev1")[0] == 200  # the cache lists the first crm
    destinations(gw, sinks, "billing")
    destinations(gw, sinks, "billing", "crm")
    if backend == "postgres":
        assert hook(gw, source, "ev2")[0] == 503
    assert hook(gw, source, "ev2")[0] == 202
    assert deliveries(gw, "ev2") == {"billing": "queued", "crm": "queued"}
    while pump(forwarding):
        pass
    assert [json.loads(r["body"])["id"] for r in sinks[1].requests] == ["ev2"]
