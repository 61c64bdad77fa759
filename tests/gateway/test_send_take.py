"""The sender's take of due sends (storage/sends.py, both backends, no request made): within
each connection's max_in_flight across takers, connections served in turn, a rate held in
the database, a send under a live lease never taken twice, and a lease run out taken over."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from keystore_service.storage.sends import in_turn

from .send_support import connection, send


@pytest.fixture
def sender(gw_app):
    return gw_app.extensions["keystore"].gateway.sender


def queue(gw, keys, name="billing"):
    for key in keys:
        status, body, _ = send(gw, key=key, wait=0, connection=name)
        assert status == 202, body


def test_in_turn_interleaves_connections_within_their_room():
    candidates = [(1, 10), (2, 10), (3, 10), (4, 20), (5, 20), (6, 30)]
    assert in_turn(candidates, {10: 5, 20: 5, 30: 5}, 4) == [1, 4, 6, 2]
    assert in_turn(candidates, {10: 1, 20: 0, 30: 5}, 10) == [1, 6]


def test_a_take_keeps_max_in_flight_across_takers(gw, sender, clock):
    connection(gw, "http://127.0.0.1:9", max_in_flight=2)
    queue(gw, [f"k{n}" for n in range(5)])
    with ThreadPoolExecutor(3) as pool:
        taken = list(pool.map(lambda n: sender.take(f"taker-{n}", 10), range(3)))
    ids = [t.send.id for got in taken for t in got]
    assert len(ids) == 2 and len(set(ids)) == 2  # two in flight, none taken twice
    assert sender.take("another", 10) == []


def test_connections_are_served_in_turn(gw, sender):
    connection(gw, "http://127.0.0.1:9", max_in_flight=10)
    connection(gw, "http://127.0.0.1:9", name="crm", max_in_flight=10)
    queue(gw, [f"b{n}" for n in range(6)])
    queue(gw, ["c0"], name="crm")
    taken = sender.take("taker", 2)
    assert sorted(t.send.connection_name for t in taken) == ["billing", "crm"]


def test_a_rate_is_held_in_the_database(gw, sender, clock):
    connection(gw, "http://127.0.0.1:9", max_in_flight=10, rate={"per_minute": 3})
    queue(gw, [f"k{n}" for n in range(6)])
    first = sender.take("one", 10)
    assert len(first) == 3
    assert sender.take("two", 10) == []  # three started this minute, across takers


def test_a_lease_that_ran_out_is_taken_over_once(gw, sender, clock):
    connection(gw, "http://127.0.0.1:9", timeout_seconds=2)
    queue(gw, ["k1"])
    [first] = sender.take("dies", 10)
    assert sender.take("other", 10) == []  # its lease holds
    clock.advance(2 + 15)
    assert first.send.lease_until <= clock()
    [again] = sender.take("other", 10)
    assert again.was == "sending" and again.send.lease_holder == "other"
    assert sender.take("third", 10) == []
