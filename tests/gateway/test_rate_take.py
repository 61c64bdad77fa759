"""A destination's rate in the take (issue 29, "Rates per destination"), on both backends
with the test clock: the GCRA on the source's row (storage/take.py) leases at most a second's
worth at once and then one per interval, in acceptance order; an ENDED event (failed without
a request) does not use the rate; a source without a rate beside it is not held; a PATCH of
the destination starts the rate afresh or clears it; the take says when a held source has
room again."""
from __future__ import annotations

import json

from sqlalchemy import select, update

from keystore_service.domain.records import SECOND
from keystore_service.storage import rate_slots
from keystore_service.storage.route_tables import hook_destinations
from keystore_service.storage.tables import hook_sources

from .support import HOLDER, create_source, deliver

MS = SECOND // 1000


def _source(gw, name: str, rate, n: int, **extra) -> dict:
    """A source `name` at `rate` (None: none) with `n` events queued, e1..en in that order."""
    made = create_source(gw, gw.token, "http://127.0.0.1:9/x", name=name, max_in_flight=100,
                         destination={"url": "http://127.0.0.1:9/x", "rate": rate}, **extra)
    for i in range(1, n + 1):
        body = json.dumps({"id": f"{name}-{i}"}).encode()
        status, answer, _ = deliver(gw, made, body, event_id=f"{name}-{i}")
        assert status == 202, answer
    return made


def _taken(forwarding, limit=100, ended=False) -> tuple[list[str], object]:
    jobs, _, slot = forwarding.take_paced(HOLDER, limit, ended)
    return [j.event.event_id for j in jobs], slot


def _ids(name: str, first: int, last: int) -> list[str]:
    return [f"{name}-{i}" for i in range(first, last + 1)]


def test_a_rate_leases_a_seconds_worth_then_one_per_interval(gw, forwarding, clock):
    _source(gw, "shop", {"per_second": 5}, 30)
    t0 = clock.now
    assert _taken(forwarding) == (_ids("shop", 1, 5), t0 + 200 * MS)  # the burst
    assert _taken(forwarding) == ([], t0 + 200 * MS)  # nothing more until its slot
    clock.advance(micros=199 * MS)
    assert _taken(forwarding)[0] == []
    clock.advance(micros=1 * MS)
    assert _taken(forwarding) == (["shop-6"], t0 + 400 * MS)
    clock.advance(micros=500 * MS)  # 2.5 intervals later: two slots, not three
    assert _taken(forwarding)[0] == _ids("shop", 7, 8)
    clock.advance(seconds=20)  # idle (the leases still hold): the burst again, not 100
    assert _taken(forwarding)[0] == _ids("shop", 9, 13)
    assert _taken(forwarding)[0] == []


def test_a_per_minute_rate_has_a_burst_of_one_at_30_a_minute(gw, forwarding, clock):
    _source(gw, "shop", {"per_minute": 30}, 5)
    t0 = clock.now
    assert _taken(forwarding) == (["shop-1"], t0 + 2 * SECOND)
    clock.advance(seconds=1.999)
    assert _taken(forwarding)[0] == []
    clock.advance(micros=1 * MS)
    assert _taken(forwarding)[0] == ["shop-2"]


def test_a_source_without_a_rate_beside_it_is_not_held(gw, forwarding, clock):
    _source(gw, "slow", {"per_second": 1}, 10)
    _source(gw, "fast", None, 10)
    taken, slot = _taken(forwarding)
    assert sorted(taken) == sorted(["slow-1", *_ids("fast", 1, 10)])
    assert slot == clock.now + SECOND
    assert _taken(forwarding) == ([], clock.now + SECOND)


def test_an_ended_event_is_failed_without_using_the_rate(gw, gw_app, forwarding, clock):
    """Events of a source paused by its destination whose retry window ended are taken all
    at once (each is failed without a request), and the rate is left as it was: the next
    forward is not held by them."""
    made = _source(gw, "shop", {"per_minute": 1}, 4, retry_window_seconds=60)
    engine = gw_app.extensions["keystore"].database.engine
    with engine.begin() as conn:
        conn.execute(update(hook_destinations).where(hook_destinations.c.source_id == select(
            hook_sources.c.id).where(hook_sources.c.name == made["name"]).scalar_subquery())
            .values(paused_until=clock.now + 3600 * SECOND))
    clock.advance(seconds=61)
    taken, slot = _taken(forwarding, ended=True)
    assert sorted(taken) == _ids("shop", 1, 4) and slot is None
    source = forwarding.sources.named(gw_app.extensions["keystore"].accounts.tenant_id(
        "acme"), "shop")
    assert source.rate_tat is None or source.rate_tat <= clock.now  # no debt


def test_a_patch_starts_the_rate_afresh_or_clears_it(gw, forwarding, clock):
    _source(gw, "shop", {"per_minute": 1}, 20)
    assert _taken(forwarding)[0] == ["shop-1"]
    assert _taken(forwarding) == ([], clock.now + 60 * SECOND)

    def patch(rate) -> None:
        r = gw.client.patch("/v1/sources/shop", headers=gw._auth(...), json={
            "destination": {"url": "http://127.0.0.1:9/x", "rate": rate}})
        assert r.status_code == 200, r.get_json()
    patch({"per_second": 2})  # the minute's debt is gone with the old rate
    assert _taken(forwarding) == (_ids("shop", 2, 3), clock.now + 500 * MS)
    patch(None)
    assert _taken(forwarding) == (_ids("shop", 4, 20), None)


def test_the_burst_is_one_seconds_worth_and_at_least_one():
    assert [rate_slots.burst(SECOND // n) for n in (1, 5, 7, 1000, 1_000_000)] == [1, 5, 7, 1000,
                                                                            1_000_000]
    assert rate_slots.burst(-(-SECOND // 7)) == 7  # 142,858 us, rounded up by the API
    assert [rate_slots.burst(60 * SECOND // n) for n in (1, 30, 60, 90, 600, 6000)] == [
        1, 1, 1, 2, 10, 100]


def test_an_event_its_filter_drops_gives_its_slot_back(gw, forwarding, clock, sink):
    """A filtered event takes a slot in the take (its filter is applied at its turn) but
    makes no forward: the settle gives the slot back. At 1/s, four events the filter drops
    ahead of a wanted one no longer hold it four seconds; the forwards still keep the rate."""
    made = create_source(gw, gw.token, sink.url, name="shop", max_in_flight=100, destination={
        "url": sink.url, "rate": {"per_second": 1},
        "filter": {"match": [{"pointer": "/wanted", "exists": True}]}})
    for i in range(1, 7):
        body = {"id": f"shop-{i}", **({"wanted": True} if i >= 5 else {})}
        status, answer, _ = deliver(gw, made, json.dumps(body).encode(), event_id=f"shop-{i}")
        assert status == 202, answer
    outcomes = []
    for _ in range(6):  # the same instant throughout
        jobs = forwarding.take(HOLDER, 100)
        ended = forwarding.settle_many(HOLDER, [(j, forwarding.attempt(j)) for j in jobs])
        outcomes += [ended[j.event.id].value for j in jobs]
    assert outcomes == ["filtered"] * 4 + ["delivered"]  # shop-6 waits for its slot
    assert [json.loads(r["body"])["id"] for r in sink.requests] == ["shop-5"]
    clock.advance(seconds=1)
    assert _taken(forwarding)[0] == ["shop-6"]
