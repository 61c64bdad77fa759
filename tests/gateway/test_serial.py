"""A destination's serial ordering per key (issue 29, "Ordering per key", serial), both
backends, against sinks on loopback: the events of a key go one at a time in acceptance order;
one waiting for its retry holds the later ones of its key (listed with `waiting_on`), never
another key's; one that failed for good holds none; an event without a key is not held; an
ordering changed away from serial lets the held events go. Then real `keystore relay`
processes, SIGKILLed while a key's event is being forwarded: the key's later events wait for
the killed forward's lease, and every key's events reach the sink in acceptance order."""
from __future__ import annotations

import json
import time
from collections import defaultdict

from sqlalchemy import select, update

from keystore_service.storage.tables import hook_events

from .support import HOLDER, Sink, create_source, deliver
from .ordering_support import got, listed, put, relay_service, set_ordering, turn

SERIAL = {"key": "/data/id", "mode": "serial"}


def sweep(forwarding) -> list[str]:
    """The relay's sweep (about once a second): it parks the held events, and lets go the
    parked ones nothing holds; the event ids it took (a probe, or one whose window ended)."""
    jobs, _ = forwarding.take_some(HOLDER, 16, ended=True)
    return [j.event.event_id for j in jobs]


def parked(gw_app) -> set[str]:
    """The queued events without a next attempt: parked behind their key's earlier one."""
    with gw_app.extensions["keystore"].database.engine.connect() as conn:
        return set(conn.execute(select(hook_events.c.event_id).where(
            hook_events.c.state == "queued", hook_events.c.next_attempt_at.is_(None)))
            .scalars())


def test_a_key_waiting_for_its_retry_holds_only_its_own_later_events(
        gw_app, gw, sink, forwarding, clock):
    fails = {"a1"}  # a1's first forward is refused; then it goes
    sink.answer = lambda n, r: 500 if json.loads(r["body"])["id"] in fails else 200
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink, SERIAL)
    for eid, key in (("a1", "A"), ("b1", "B"), ("a2", "A"), ("a3", "A"), ("b2", "B")):
        put(gw, source, eid, {"id": key})
    assert turn(forwarding) == ["delivered", "delivered", "retry"]  # a1, then b1 and b2
    assert got(sink) == ["a1", "b1", "b2"]
    assert listed(gw) == {"a1": ("queued", None), "a2": ("queued", "a1"),
                          "a3": ("queued", "a1"), "b1": ("delivered", None),
                          "b2": ("delivered", None)}
    status, answer, _ = gw.get("/v1/deliveries", event_id="a3")
    assert answer["deliveries"][0]["waiting_on"] == "a1"
    assert turn(forwarding) == [] and len(sink.requests) == 3  # before a1's retry: held
    fails.clear()
    clock.advance(3600)
    # a1 goes at its retry; a2 only once a1 is settled, a3 once a2 is: a take each
    assert turn(forwarding) == ["delivered", "delivered", "delivered"]
    assert got(sink) == ["a1", "b1", "b2", "a1", "a2", "a3"]
    assert set(listed(gw).values()) == {("delivered", None)}


def test_a_probe_never_jumps_a_key(gw_app, gw, sink, forwarding, clock):
    """A failing destination's probe takes its oldest queued event whatever its backoff:
    while a1 is being forwarded, that is a2, which its key holds; so the probe takes none."""
    sink.answer = lambda n, r: 503
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink, SERIAL)
    put(gw, source, "a1", {"id": "A"})
    put(gw, source, "a2", {"id": "A"})
    assert turn(forwarding) == ["retry"]  # the destination is failing now
    clock.advance(2)  # a1's retry is due (the first backoff is at most 1 s)
    assert [j.event.event_id for j in forwarding.take(HOLDER, 16)] == ["a1"]  # in flight
    clock.advance(20)  # the probe is due (PROBE_SECONDS), a1's lease still holds
    jobs, _ = forwarding.take_some(HOLDER, 16, ended=True)
    assert [j.event.event_id for j in jobs] == []
    assert got(sink) == ["a1"]


def test_one_that_failed_for_good_no_longer_holds_its_key(gw_app, gw, sink, forwarding, clock):
    sink.answer = lambda n, r: 500 if json.loads(r["body"])["id"] == "a1" else 200
    source = create_source(gw, gw.token, sink.url, retry_window_seconds=3600)
    set_ordering(gw, sink, SERIAL)
    put(gw, source, "a1", {"id": "A"})
    put(gw, source, "a2", {"id": "A"})
    for _ in range(40):  # a1's retries until its window ends
        turn(forwarding)
        if listed(gw)["a1"][0] == "failed":
            break
        clock.advance(600)
    assert listed(gw)["a1"] == ("failed", None)  # a person is asked (delivery_failed)
    turn(forwarding)
    assert listed(gw)["a2"] == ("delivered", None) and got(sink)[-1] == "a2"


def test_events_without_a_key_are_not_held_nor_hold(gw_app, gw, sink, forwarding, clock):
    sink.answer = lambda n, r: 500 if r["headers"]["Idempotency-Key"] == "x1" else 200
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink, SERIAL)
    put(gw, source, "x1", {"v": 1})  # no key: not ordered
    put(gw, source, "x2", {"v": 2})
    put(gw, source, "n1", {"id": None})  # a null key is none
    status, _, _ = deliver(gw, source, b"not json", event_id="t1")
    assert status == 202
    put(gw, source, "big", {"id": "k" * 100_000})  # a huge key: a 71-character digest
    put(gw, source, "big2", {"id": "k" * 100_000})
    put(gw, source, "num", {"id": 2 ** 63})
    put(gw, source, "num2", {"id": 9223372036854775808.0})  # the same number: the same key
    assert sorted(turn(forwarding)) == ["delivered"] * 7 + ["retry"]
    with gw_app.extensions["keystore"].database.engine.connect() as conn:
        keys = {r[0]: r[1] for r in conn.execute(select(hook_events.c.event_id,
                                                        hook_events.c.ordering_key))}
    assert keys["x1"] is keys["n1"] is keys["t1"] is None
    assert keys["big"] == keys["big2"] and len(keys["big"]) == 71
    assert keys["num"] == keys["num2"] and keys["num"] != keys["big"]
    # each pair of one key went in its order, in takes one after the other
    sent = [r["headers"]["Idempotency-Key"] for r in sink.requests]
    assert sent.index("big") < sent.index("big2") and sent.index("num") < sent.index("num2")


def test_an_ordering_changed_away_from_serial_lets_the_held_events_go(
        gw_app, gw, sink, forwarding, clock):
    sink.answer = lambda n, r: 500 if json.loads(r["body"])["id"] == "a1" else 200
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink, SERIAL)
    put(gw, source, "a1", {"id": "A"})
    put(gw, source, "a2", {"id": "A"})
    assert turn(forwarding) == ["retry"]
    sweep(forwarding)
    assert parked(gw_app) == {"a2"}
    set_ordering(gw, sink, SERIAL)  # the same ordering again: still held
    assert turn(forwarding) == [] and listed(gw)["a2"] == ("queued", "a1")
    set_ordering(gw, sink, {"key": "/data/other", "mode": "serial"})  # another key
    assert listed(gw)["a2"] == ("queued", None)
    assert turn(forwarding) == ["delivered"] and got(sink) == ["a1", "a2"]
    put(gw, source, "c1", {"other": "C"})  # the new key holds new events
    put(gw, source, "c2", {"other": "C"})
    assert listed(gw)["c2"] == ("queued", "c1")


def test_the_sweep_parks_held_events_and_a_settle_lets_the_next_one_go(
        gw_app, gw, sink, forwarding, clock):
    """Held events are parked out of the due range, so takes do not read them while they
    wait (a key's backlog of thousands would slow every tenant's takes); the settle of the
    event before them makes the next one due at once, without waiting for a sweep."""
    fails = {"a1"}
    sink.answer = lambda n, r: 500 if json.loads(r["body"])["id"] in fails else 200
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink, SERIAL)
    for eid in ("a1", "a2", "a3"):
        put(gw, source, eid, {"id": "A"})
    assert turn(forwarding) == ["retry"]
    assert sweep(forwarding) == [] and parked(gw_app) == {"a2", "a3"}
    status, answer, _ = gw.get("/v1/deliveries", event_id="a3")
    assert answer["deliveries"][0]["next_attempt_at"] is None
    assert answer["deliveries"][0]["waiting_on"] == "a1"
    fails.clear()
    clock.advance(2)  # a1's retry
    jobs = forwarding.take(HOLDER, 16)
    assert [j.event.event_id for j in jobs] == ["a1"]
    forwarding.settle_many(HOLDER, [(j, forwarding.attempt(j)) for j in jobs])
    assert parked(gw_app) == {"a3"}  # a2 is due now: no sweep came in between
    assert [j.event.event_id for j in forwarding.take(HOLDER, 16)] == ["a2"]


def test_the_sweep_lets_go_a_parked_event_that_nothing_holds(gw_app, gw, sink, forwarding,
                                                              clock):
    """A settle that raced the sweep's parking can leave the next event parked with nothing
    before it: the next sweep lets it go."""
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink, SERIAL)
    put(gw, source, "a1", {"id": "A"})
    with gw_app.extensions["keystore"].database.engine.begin() as conn:
        conn.execute(update(hook_events).values(next_attempt_at=None))  # as if raced
    assert turn(forwarding) == [] and parked(gw_app) == {"a1"}
    jobs, _ = forwarding.take_some(HOLDER, 16, ended=True)  # let go, and taken at once
    assert [j.event.event_id for j in jobs] == ["a1"] and parked(gw_app) == set()
    forwarding.settle_many(HOLDER, [(j, forwarding.attempt(j)) for j in jobs])
    assert got(sink) == ["a1"]


def test_the_sweep_reaches_a_leftover_behind_more_parked_events_than_it_looks_at(
        gw_app, gw, sink, forwarding, clock, monkeypatch):
    """A sweep looks at UNPARK_BATCH parked events (3 here), the next ones at each sweep: a
    leftover parked behind more events that wait for good reason (a retried key's backlog)
    is let go at a later sweep, not left behind them for ever."""
    from keystore_service.storage import take
    monkeypatch.setattr(take, "UNPARK_BATCH", 3)
    events = forwarding.events
    events._take = take.Take(events.db.engine.dialect, events.db.sqlite)
    sink.answer = lambda n, r: 500 if json.loads(r["body"])["id"] == "a1" else 200
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink, SERIAL)
    for eid in ("a1", "a2", "a3", "a4", "a5"):
        put(gw, source, eid, {"id": "A"})
    assert turn(forwarding) == ["retry"]
    assert sweep(forwarding) == [] and parked(gw_app) == {"a2", "a3", "a4", "a5"}
    put(gw, source, "b1", {"id": "B"})
    with gw_app.extensions["keystore"].database.engine.begin() as conn:  # as if raced
        conn.execute(update(hook_events).where(hook_events.c.event_id == "b1").values(
            next_attempt_at=None))
    seen = [sweep(forwarding) for _ in range(3)]  # a2-a4 (all held), then a5 and b1
    assert ["b1"] in seen and parked(gw_app) == {"a2", "a3", "a4", "a5"}, seen


def test_a_redelivered_event_waits_while_a_later_one_of_its_key_is_forwarded(
        gw_app, gw, sink, forwarding, clock):
    """One at a time: a1, delivered and then redelivered, is not forwarded beside a2, which
    is being forwarded; it goes once a2 settles."""
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink, SERIAL)
    put(gw, source, "a1", {"id": "A"})
    assert turn(forwarding) == ["delivered"]
    put(gw, source, "a2", {"id": "A"})
    (a2,) = forwarding.take(HOLDER, 16)  # in flight
    status, answer, _ = gw.post("/v1/deliveries/redeliver",
                                {"source": "shop", "event_id": "a1", "force": True})
    assert status == 202, answer
    assert forwarding.take(HOLDER, 16) == [] and sweep(forwarding) == []
    assert listed(gw)["a1"] == ("queued", "a2") and parked(gw_app) == {"a1"}
    forwarding.settle_many(HOLDER, [(a2, forwarding.attempt(a2))])
    assert turn(forwarding) == ["delivered"]
    assert got(sink) == ["a1", "a2", "a1"]


def test_relay_kills_keep_each_keys_order(database_url, tmp_path):
    """Two `keystore relay` processes forward 4 keys x 4 events to a sink that takes 0.3 s
    a forward; both are SIGKILLed while the first key's first event is being forwarded,
    and two new ones started. That event's lease (timeout 1 s + 15 s) holds its key's later
    events; the other keys go on. In the end every event is delivered, and each key's events
    reached the sink in acceptance order (the killed forward once more, at its turn)."""
    ks, http, relays = relay_service(database_url, tmp_path)
    first = {"seen": False}

    def answer(n, r):
        first["seen"] = True
        time.sleep(0.3)
        return 200
    sink = Sink(answer)
    try:
        source = create_source(http, http.token, sink.url, max_in_flight=16,  # room for all
                               destination={"url": sink.url, "timeout_seconds": 1,
                                            "ordering": SERIAL})
        order = [f"{key}{n}" for n in range(4) for key in "ABCD"]
        for eid in order:
            put(http, source, eid, {"id": eid[0]})
        for relay in relays:
            relay.start()
        deadline = time.monotonic() + 30
        while not first["seen"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert first["seen"], "no forward started"
        for relay in relays:
            relay.kill()
        # what may be forwarded twice: what the sink saw, and what was still leased (sent,
        # maybe not yet read by the sink on a loaded machine) when the relays died
        leased = http.get("/v1/deliveries", limit=100, state="delivering")[1]["deliveries"]
        killed = {json.loads(r["body"])["id"] for r in sink.requests} | {
            d["event_id"] for d in leased}
        for relay in relays:
            relay.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = {d["event_id"] for d in http.get("/v1/deliveries", limit=100,
                                                    state="delivered")[1]["deliveries"]}
            if len(done) == len(order):
                break
            time.sleep(0.2)
        assert len(done) == len(order), sorted(set(order) - done)
    finally:
        for relay in relays:
            relay.stop()
        sink.close()
        ks.database.engine.dispose()
    per_key: dict[str, list[str]] = defaultdict(list)
    for eid in got(sink):
        if not per_key[eid[0]] or per_key[eid[0]][-1] != eid:  # a killed forward again
            per_key[eid[0]].append(eid)
    assert dict(per_key) == {k: [f"{k}{n}" for n in range(4)] for k in "ABCD"}, got(sink)
    assert killed and len(got(sink)) <= len(order) + len(killed)  # each once, or the killed again
