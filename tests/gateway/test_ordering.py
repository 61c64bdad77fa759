"""A destination's ordering per key in the relay (issue 29, "Ordering per key", newer_wins),
both backends, against a sink on loopback: an event whose version is not newer than the last
delivered one of its key is `superseded` when its turn comes (no request, no attempt row,
its record succeeded with {"superseded": true, "by": <event id>}); an event that cannot be
compared goes out; the stored version never goes back, also under two relays racing."""
from __future__ import annotations

import json
import threading
import time

from sqlalchemy import select

from keystore_service.gateway.relay import Relay
from keystore_service.storage.route_tables import hook_versions
from keystore_service.storage.tables import hook_attempts

from .ordering_support import got, listed, put, set_ordering, turn
from .support import HOLDER, count, create_source, delivery

BIG = 2 ** 63  # past a signed 64-bit integer and a double's exact integers: compared exactly


def record(gw, event_id: str) -> dict:
    return gw.get("/v1/keys", scope="hook:shop", key=event_id)[1]["record"]


def states(gw, state: str) -> list[str]:
    status, answer, _ = gw.get("/v1/deliveries", state=state)
    assert status == 200, answer
    return sorted(d["event_id"] for d in answer["deliveries"])


def stored(gw_app) -> list:
    with gw_app.extensions["keystore"].database.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(
            hook_versions.c.version, hook_versions.c.event_pk).order_by(
            hook_versions.c.ordering_key))]


def test_a_late_older_or_equal_version_is_superseded_and_a_newer_one_goes(
        gw_app, gw, sink, forwarding, clock):
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink)
    put(gw, source, "ev1", {"id": "in_1", "v": 5})
    assert turn(forwarding) == ["delivered"]
    put(gw, source, "ev2", {"id": "in_1", "v": 4})  # late: older
    put(gw, source, "ev3", {"id": "in_1", "v": 5.0})  # the same version
    put(gw, source, "ev4", {"id": "in_2", "v": 1})  # another key: its own
    assert turn(forwarding) == ["delivered", "superseded", "superseded"]
    put(gw, source, "ev5", {"id": "in_1", "v": 6})
    assert turn(forwarding) == ["delivered"]
    assert got(sink) == ["ev1", "ev4", "ev5"]
    for eid in ("ev2", "ev3"):
        d = delivery(gw, eid)
        assert d["state"] == "superseded" and d["attempts"] == [] and d["attempt_count"] == 0
        assert d["delivered_at"] is None and d["next_attempt_at"] is None
        r = record(gw, eid)
        assert r["state"] == "succeeded" and r["result"] == {"superseded": True, "by": "ev1"}
    assert count(gw_app, hook_attempts) == 3  # one per request the sink got
    assert states(gw, "superseded") == ["ev2", "ev3"]
    assert sorted(v for v, _ in stored(gw_app)) == ["1", "6"]


def test_an_older_event_queued_behind_a_delivered_newer_one_is_superseded(
        gw_app, gw, sink, forwarding, clock):
    """ev1 (v1) is refused and waits for its retry; ev2 (v2) of the same key is delivered
    meanwhile: at ev1's retry it is compared again, and superseded by ev2."""
    sink.answer = lambda n, r: 500 if json.loads(r["body"])["id"] == "ev1" else 200
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink)
    put(gw, source, "ev1", {"id": "in_1", "v": "2026-12-02T10:00:00Z"})
    assert turn(forwarding) == ["retry"]
    put(gw, source, "ev2", {"id": "in_1", "v": "2026-12-02T11:00:00+01:00"})  # 10:00Z too
    assert turn(forwarding) == ["delivered"]
    put(gw, source, "ev3", {"id": "in_1", "v": "2026-12-02T09:59:59.999999Z"})
    assert turn(forwarding) == ["superseded"]
    clock.advance(3600)  # ev1's retry is due: the same instant as ev2's is not newer
    assert turn(forwarding) == ["superseded"]
    assert got(sink) == ["ev1", "ev2"]  # ev1's refused forward, then ev2; ev1 never again
    assert record(gw, "ev1")["result"] == {"superseded": True, "by": "ev2"}
    assert record(gw, "ev3")["result"] == {"superseded": True, "by": "ev2"}
    d = delivery(gw, "ev1")
    assert d["state"] == "superseded" and d["attempt_count"] == 1  # its one real forward


def test_what_cannot_be_compared_is_forwarded(gw_app, gw, sink, forwarding, clock):
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink)
    put(gw, source, "ev1", {"id": "in_1", "v": 10})
    assert turn(forwarding) == ["delivered"]
    put(gw, source, "ev2", {"v": 1})  # no key
    put(gw, source, "ev3", {"id": None, "v": 1})  # a null key is none
    put(gw, source, "ev4", {"id": "in_1"})  # no version
    put(gw, source, "ev5", {"id": "in_1", "v": True})  # a version of no kind
    put(gw, source, "ev6", {"id": "in_1", "v": "9"})  # a string against a number
    put(gw, source, "ev7", {"id": "in_1", "v": {"n": 1}})
    assert turn(forwarding) == ["delivered"] * 6
    assert stored(gw_app)[0][0] == "10"  # none of them moved the key's version
    put(gw, source, "ev8", {"id": "in_1", "v": 9})
    assert turn(forwarding) == ["superseded"]


def test_numbers_compare_exactly_and_keys_by_their_canonical_value(gw_app, gw, sink,
                                                                   forwarding, clock):
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink)
    put(gw, source, "ev1", {"id": {"b": 1, "a": "é"}, "v": BIG + 1})
    assert turn(forwarding) == ["delivered"]
    put(gw, source, "ev2", {"id": {"a": "\u00e9", "b": 1.0}, "v": BIG})  # the same key
    put(gw, source, "ev3", {"id": "in_1", "v": "١٢"})  # non-ASCII digits: a string
    assert turn(forwarding) == ["delivered", "superseded"]
    put(gw, source, "ev4", {"id": "in_1", "v": "٣"})  # code point order: U+0663 > U+0661
    put(gw, source, "ev5", {"id": {"a": "é", "b": 1}, "v": BIG + 2})
    assert turn(forwarding) == ["delivered", "delivered"]
    assert sorted(v for v, _ in stored(gw_app)) == ['"٣"', str(BIG + 2)]


def test_a_redelivered_superseded_event_is_compared_again(gw_app, gw, sink, forwarding,
                                                         clock):
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink)
    put(gw, source, "ev1", {"id": "in_1", "v": 2})
    assert turn(forwarding) == ["delivered"]
    put(gw, source, "ev2", {"id": "in_1", "v": 1})
    assert turn(forwarding) == ["superseded"]
    status, answer, _ = gw.post("/v1/deliveries/redeliver", {"source": "shop",
                                                             "event_id": "ev2"})
    assert status == 202, answer  # no force: nothing was sent
    assert turn(forwarding) == ["superseded"]  # compared again: still not newer
    set_ordering(gw, sink, None)  # with the ordering cleared it goes out
    status, answer, _ = gw.post("/v1/deliveries/redeliver", {"source": "shop",
                                                             "event_id": "ev2"})
    assert status == 202, answer
    assert turn(forwarding) == ["delivered"]
    assert got(sink) == ["ev1", "ev2"]


def test_events_of_one_key_go_one_at_a_time_and_each_compares_with_the_one_before(
        gw_app, gw, sink, forwarding, clock):
    """Two events of a key due together are never forwarded at once (both would compare
    with the version delivered before either, and the destination could get the older one
    last): the earlier goes, then the later compares with it; here the later is older, so
    it is superseded and the destination only ever saw the newer state."""
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink)
    put(gw, source, "ev1", {"id": "in_1", "v": 2})
    put(gw, source, "ev2", {"id": "in_1", "v": 1})
    put(gw, source, "ev3", {"id": "in_2", "v": 1})  # another key goes beside them
    first = forwarding.take(HOLDER, 16)
    assert sorted(j.event.event_id for j in first) == ["ev1", "ev3"]
    assert listed(gw)["ev2"] == ("queued", "ev1")  # the one being forwarded holds it
    forwarding.settle_many(HOLDER, [(j, forwarding.attempt(j)) for j in first])
    assert turn(forwarding) == ["superseded"]
    assert got(sink) == ["ev1", "ev3"] and sorted(v for v, _ in stored(gw_app)) == ["1", "2"]


def test_one_waiting_for_its_retry_holds_nothing_and_is_superseded_at_its_turn(
        gw_app, gw, sink, forwarding, clock):
    """newer_wins is not serial: an event waiting for its retry does not hold the later
    ones of its key; when its retry comes, a newer one was delivered, so it is superseded
    (the destination never gets the older state after the newer)."""
    sink.answer = lambda n, r: 500 if json.loads(r["body"])["id"] == "ev1" else 200
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink)
    put(gw, source, "ev1", {"id": "in_1", "v": 1})
    put(gw, source, "ev2", {"id": "in_1", "v": 2})
    # ev1 fails; ev2, which waited while ev1 was due, goes while ev1 waits for its backoff
    assert turn(forwarding) == ["delivered", "retry"]
    assert listed(gw)["ev1"] == ("queued", None)  # it waits on nothing: its backoff only
    clock.advance(5)
    assert turn(forwarding) == ["superseded"]
    assert got(sink) == ["ev1", "ev2"] and stored(gw_app)[0][0] == "2"


def test_the_metric_counts_superseded_forwards(gw_app, gw, sink, forwarding, clock):
    from prometheus_client.parser import text_string_to_metric_families

    def superseded() -> float:
        text = gw_app.test_client().get("/metrics").get_data(as_text=True)
        return next((s.value for f in text_string_to_metric_families(text)
                     for s in f.samples if s.name == "keystore_hook_forwards_total"
                     and s.labels == {"tenant": "acme", "source": "shop",
                                      "destination": "default", "outcome": "superseded"}), 0.0)
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink)
    before = superseded()
    put(gw, source, "ev1", {"id": "in_1", "v": 2})
    assert turn(forwarding) == ["delivered"]
    put(gw, source, "ev2", {"id": "in_1", "v": 1})
    assert turn(forwarding) == ["superseded"]
    assert superseded() == before + 1


def test_a_running_relay_supersedes(gw_app, gw, sink, clock):
    forwarding = gw_app.extensions["keystore"].gateway.forwarding
    source = create_source(gw, gw.token, sink.url)
    set_ordering(gw, sink, max_in_flight=1)  # one at a time: each sees the one before
    for n, v in enumerate((3, 1, 4, 2, 5)):
        put(gw, source, f"ev{n}", {"id": "in_1", "v": v})
    relay = Relay(forwarding, 4, "ordering-relay").start()
    try:
        deadline = time.monotonic() + 15
        while states(gw, "queued") + states(gw, "delivering") and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        relay.stop()
    assert states(gw, "superseded") == ["ev1", "ev3"]
    assert got(sink) == ["ev0", "ev2", "ev4"]
    assert stored(gw_app)[0][0] == "5"


def test_two_relays_racing_never_lower_the_stored_version(gw_app, gw, sink, forwarding):
    """Two writers advance one key at once, each in its own transaction, with versions in
    opposite orders: the stored version only grows, and ends at the highest. On PostgreSQL
    the second waits on the first's row lock (the insert that finds the row, then FOR
    UPDATE); on SQLite the writers take turns."""
    create_source(gw, gw.token, sink.url)
    versions = forwarding.versions
    ks = gw_app.extensions["keystore"]
    tid = ks.accounts.tenant_id("acme")
    did = ks.gateway.sources.get(tid, "shop").source.destination_id
    seen: list[int] = []
    errors: list[BaseException] = []

    def writer(order: list[int]) -> None:
        try:
            for v in order:
                with forwarding.events.transaction() as cur:
                    versions.advance(cur, tid, did, "sha256:" + "0" * 64, str(v), v, v,
                                     lambda old, v=v: v > int(old))
                    seen.append(int(versions._locked.one(cur, {
                        "tid": tid, "did": did, "key": "sha256:" + "0" * 64})[0]))
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)
    up, down = list(range(1, 61)), list(range(60, 0, -1))
    threads = [threading.Thread(target=writer, args=(o,)) for o in (up, down)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert stored(gw_app) == [("60", 60)]
    # what each transaction saw under its lock, in commit order: it never went down
    assert len(seen) == 120 and seen == sorted(seen) and seen[-1] == 60


def test_a_held_lock_makes_the_other_writer_wait_and_compare_after_it(gw_app, gw, sink,
                                                                      forwarding):
    """The first writer holds its transaction open after writing 5; the second's 3 waits
    (PostgreSQL: on the row; SQLite: on the writer's turn) and then leaves 5 as it is."""
    create_source(gw, gw.token, sink.url)
    versions, events = forwarding.versions, forwarding.events
    ks = gw_app.extensions["keystore"]
    tid = ks.accounts.tenant_id("acme")
    did = ks.gateway.sources.get(tid, "shop").source.destination_id
    key = "sha256:" + "1" * 64
    with events.transaction() as cur:
        assert versions.advance(cur, tid, did, key, "4", 4, 0, lambda old: True)
    wrote = threading.Event()
    release = threading.Event()
    result: list[bool] = []

    def first() -> None:
        with events.transaction() as cur:
            versions.advance(cur, tid, did, key, "5", 5, 1, lambda old: 5 > int(old))
            wrote.set()
            release.wait(10)

    def second() -> None:
        with events.transaction() as cur:
            result.append(versions.advance(cur, tid, did, key, "3", 3, 2,
                                           lambda old: 3 > int(old)))
    a = threading.Thread(target=first)
    a.start()
    assert wrote.wait(10)
    b = threading.Thread(target=second)
    b.start()
    b.join(0.5)
    assert b.is_alive()  # it waits for the first's commit
    release.set()
    a.join(10)
    b.join(10)
    assert result == [False] and stored(gw_app) == [("5", 5)]


def test_two_relay_processes_never_send_a_key_twice_at_once_nor_an_older_after_a_newer(
        database_url, tmp_path):
    """Two `keystore relay` processes (4 forwards each at once, room for 16 at the
    destination) forward 4 keys x 6 events whose versions come in a shuffled order, to a
    sink that takes 0.1 s a forward and notes how many of each key it holds at once. No key
    is ever forwarded twice at once, each key's versions reach the sink rising (an older one
    after a newer one is superseded, never sent), every event ends delivered or superseded,
    and each key's stored version is its highest."""
    import random

    from .ordering_support import relay_service
    from .support import Sink

    ks, http, relays = relay_service(database_url, tmp_path)
    lock, holding, most = threading.Lock(), {}, {}

    def answer(n, r):
        key = json.loads(r["body"])["data"]["id"]
        with lock:
            holding[key] = holding.get(key, 0) + 1
            most[key] = max(most.get(key, 0), holding[key])
        time.sleep(0.1)
        with lock:
            holding[key] -= 1
        return 200
    sink = Sink(answer)
    rng = random.Random(29)
    versions = {k: rng.sample(range(1, 7), 6) for k in "ABCD"}
    events = [(f"{k}{n}", k, versions[k][n]) for n in range(6) for k in "ABCD"]
    try:
        source = create_source(http, http.token, sink.url, max_in_flight=16, destination={
            "url": sink.url, "ordering": {"key": "/data/id", "mode": "newer_wins",
                                          "version": "/data/v"}})
        for eid, key, v in events:
            put(http, source, eid, {"id": key, "v": v})
        for relay in relays:
            relay.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            settled = {d["event_id"]: d["state"] for d in http.get(
                "/v1/deliveries", limit=100)[1]["deliveries"]
                if d["state"] in ("delivered", "superseded")}
            if len(settled) == len(events):
                break
            time.sleep(0.2)
        assert len(settled) == len(events), settled
    finally:
        for relay in relays:
            relay.stop()
        sink.close()
    sent: dict[str, list[int]] = {}
    for r in sink.requests:
        data = json.loads(r["body"])["data"]
        sent.setdefault(data["id"], []).append(data["v"])
    assert most == {k: 1 for k in "ABCD"}, most
    for key, got_versions in sent.items():
        assert got_versions == sorted(set(got_versions)) and got_versions[-1] == 6, sent
    assert {eid for eid, state in settled.items() if state == "delivered"} == {
        f"{k}{versions[k].index(v)}" for k, vs in sent.items() for v in vs}
    with ks.database.engine.connect() as conn:
        assert sorted(conn.execute(select(hook_versions.c.version)).scalars()) == ["6"] * 4
    ks.database.engine.dispose()
