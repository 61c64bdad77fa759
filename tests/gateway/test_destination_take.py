"""The take per destination (issue 29, "Routing: several destinations"; migration 0021), on
both backends with the test clock: each event goes to one destination of its source, and
what v1.1 reckons per source (a pause, max_in_flight, the rate, the order per key, the last
newer_wins version, the last error) is the destination's, so a held destination never holds
another of its source.

The API gives a source one destination so far; here a second one is a row made beside it and
some of the source's events are moved to it, the state that several destinations will make.
"""
from __future__ import annotations

import json

from sqlalchemy import insert, select, update

from keystore_service.domain.records import SECOND
from keystore_service.storage.route_tables import hook_destinations
from keystore_service.storage.tables import hook_events

from .support import HOLDER, Sink, create_source, deliver, pump

D, E = hook_destinations.c, hook_events.c


def _two(gw, gw_app, first_url: str, second_url: str, n: int, **given) -> tuple[int, int]:
    """A source with events e1..en, the odd ones for its destination (with `given`) and the
    even ones for a second destination at `second_url`; the two destinations' ids."""
    made = create_source(gw, gw.token, first_url, max_in_flight=100,
                         destination={"url": first_url, **given})
    for i in range(1, n + 1):
        body = {"id": f"e{i}", "k": "same", "v": (i + 1) // 2}  # versions 1, 1, 2, 2, ...
        status, answer, _ = deliver(gw, made, json.dumps(body).encode(), event_id=f"e{i}")
        assert status == 202, answer
    engine = gw_app.extensions["keystore"].database.engine
    with engine.begin() as conn:
        first, tid, sid, limit, timeout = conn.execute(select(
            D.id, D.tenant_id, D.source_id, D.max_in_flight, D.timeout_seconds)).one()
        second = conn.execute(insert(hook_destinations).values(
            tenant_id=tid, source_id=sid, name="second", position=1, url=second_url,
            timeout_seconds=timeout, max_in_flight=limit).returning(D.id)).scalar_one()
        conn.execute(update(hook_events).where(E.event_id.in_(
            [f"e{i}" for i in range(2, n + 1, 2)])).values(destination_id=second))
    return first, second


def _change(gw_app, destination: int, **values) -> None:
    with gw_app.extensions["keystore"].database.engine.begin() as conn:
        conn.execute(update(hook_destinations).where(D.id == destination).values(**values))


def _taken(forwarding, limit=100) -> list[tuple[str, str]]:
    return sorted((j.event.event_id, j.source.destination_url)
                  for j in forwarding.take(HOLDER, limit))


def test_each_event_goes_to_its_own_destinations_url(gw, gw_app, forwarding):
    _two(gw, gw_app, "http://127.0.0.1:9/a", "http://127.0.0.1:9/b", 4)
    assert _taken(forwarding) == [("e1", "http://127.0.0.1:9/a"), ("e2", "http://127.0.0.1:9/b"),
                                  ("e3", "http://127.0.0.1:9/a"), ("e4", "http://127.0.0.1:9/b")]


def test_a_paused_destination_holds_only_its_own_events(gw, gw_app, forwarding, clock):
    first, _ = _two(gw, gw_app, "http://127.0.0.1:9/a", "http://127.0.0.1:9/b", 4)
    _change(gw_app, first, paused_until=clock.now + 20 * SECOND)  # within the leases taken
    assert _taken(forwarding) == [("e2", "http://127.0.0.1:9/b"), ("e4", "http://127.0.0.1:9/b")]
    clock.advance(seconds=20)
    assert [e for e, _ in _taken(forwarding)] == ["e1", "e3"]


def test_max_in_flight_and_the_rate_are_each_destinations(gw, gw_app, forwarding):
    first, second = _two(gw, gw_app, "http://127.0.0.1:9/a", "http://127.0.0.1:9/b", 8)
    _change(gw_app, first, max_in_flight=1)
    _change(gw_app, second, rate_interval_us=SECOND // 2)  # 2 a second: a burst of 2
    assert [e for e, _ in _taken(forwarding)] == ["e1", "e2", "e4"]
    assert _taken(forwarding) == []


def test_a_serial_key_is_held_per_destination(gw, gw_app, forwarding):
    """All six events have one key: each destination forwards its first one at once, and
    the next of each only when that one has settled."""
    ordering = {"key": "/k", "mode": "serial"}
    _two(gw, gw_app, "http://127.0.0.1:9/a", "http://127.0.0.1:9/b", 6,
         ordering=ordering)
    assert [e for e, _ in _taken(forwarding)] == ["e1", "e2"]
    assert _taken(forwarding) == []


def test_a_failing_destination_gets_the_error_and_the_pause_the_other_none(
        gw, gw_app, forwarding, clock):
    busy = Sink(lambda n, r: (503, {"Retry-After": "120"}))
    try:
        first, second = _two(gw, gw_app, "http://127.0.0.1:9/never", busy.url, 2)
        _change(gw_app, first, paused_until=clock.now + 30 * SECOND)  # e1 waits
        assert pump(forwarding) == ["retry"]
        assert [json.loads(r["body"])["id"] for r in busy.requests] == ["e2"]
    finally:
        busy.close()
    with gw_app.extensions["keystore"].database.engine.connect() as conn:
        rows = {i: (p, e) for i, p, e in conn.execute(
            select(D.id, D.paused_until, D.last_error)).all()}
    assert rows[first] == (clock.now + 30 * SECOND, None)
    assert rows[second][0] == clock.now + 120 * SECOND and "503" in rows[second][1]


def test_newer_wins_compares_with_what_each_destination_delivered(gw, gw_app, forwarding,
                                                                  sink):
    """e1 and e3 (versions 1 and 2) go to one destination, e2 and e4 (1 and 2) to the other:
    each destination delivers both of its own; e2 is no older than what *its* destination
    delivered, though its key's version 1 went to the other one first (migration 0022)."""
    ordering = {"key": "/k", "mode": "newer_wins", "version": "/v"}
    _two(gw, gw_app, sink.url, sink.url + "?second", 4, ordering=ordering)
    outcomes = [o for _ in range(4) for o in pump(forwarding)]  # bounded: one a key a turn
    assert outcomes == ["delivered"] * 4
    got = sorted((r["path"].endswith("?second"), json.loads(r["body"])["id"])
                 for r in sink.requests)
    assert got == [(False, "e1"), (False, "e3"), (True, "e2"), (True, "e4")]


def test_the_queues_next_attempt_skips_a_parked_event(gw, gw_app, forwarding, clock):
    """e1 waits for its retry and holds e2 of its key, which the sweep parks (no next
    attempt): the source's queue shows e1's next attempt, on both backends (SQLite sorts a
    null first: the parked event's "none" hid it)."""
    failing = Sink(lambda n, r: 500)
    try:
        made = create_source(gw, gw.token, failing.url, destination={
            "url": failing.url, "ordering": {"key": "/k", "mode": "serial"}})
        for i in (1, 2):
            body = json.dumps({"id": f"e{i}", "k": "same"}).encode()
            assert deliver(gw, made, body, event_id=f"e{i}")[0] == 202
        assert pump(forwarding) == ["retry"]
        forwarding.take_some(HOLDER, 10, ended=True)  # the sweep parks e2
    finally:
        failing.close()
    status, listed, _ = gw.get("/v1/deliveries", event_id="e1")
    assert status == 200 and listed["deliveries"][0]["next_attempt_at"] is not None
    status, shown, _ = gw.get("/v1/sources/shop")
    assert status == 200, shown
    assert shown["source"]["queue"]["queued"] == 2
    assert shown["source"]["queue"]["next_attempt_at"] == listed["deliveries"][0][
        "next_attempt_at"]
