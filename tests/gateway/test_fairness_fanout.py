"""Fair forwarding with several destinations per source (CONTRACT.md, "Fair forwarding" and
"Routing: several destinations"), on both backends: the turns are tenants first, then each
tenant's sources, then each source's destinations, so a source with ten flooded destinations
gets one turn for another source's one, not ten. The take itself on the test clock, and a
real relay on the real clock against a flood for ten destinations that time out."""
from __future__ import annotations

import json
import threading
import time

from tests.support import Http

from .support import SECRET, Sink, create_source, deliver

TEN = 10  # the contract's most destinations a source may have


def fanned(http, name: str, urls: list[str], **given) -> dict:
    """A source of `http`'s tenant with a destination d0, d1, ... at each of `urls`."""
    status, answer, _ = http.post("/v1/sources", {
        "name": name, "provider": "testing", "secrets": [SECRET],
        "destinations": [{"name": f"d{i}", "url": url, **given} for i, url in enumerate(urls)]})
    assert status == 201, answer
    return answer["source"]


def backlog(http, source: dict, prefix: str, n: int) -> None:
    for i in range(n):
        status, body, _ = deliver(http, source, json.dumps({"i": i}).encode(),
                                  event_id=f"{prefix}{i}")
        assert status == 202, body


def _served(jobs) -> tuple[dict[str, int], list[str]]:
    """How many events each source got, and the destinations of source `a` in take order."""
    names = [job.source.name for job in jobs]
    return ({n: names.count(n) for n in sorted(set(names))},
            [job.source.destination_name for job in jobs if job.source.name == "a"])


# --- the take itself, on the test clock -----------------------------------------------------

def test_a_source_with_ten_destinations_gets_one_turn_for_another_sources_one(
        gw, sink, forwarding):
    """One tenant: `a` (older, ten destinations, 12 events each) and `b` (one destination,
    12 events): a take of 8 gives each source 4, a's to four of its destinations, where
    turns by destination gave a all 8. The next takes go on in turn: a's next destinations
    (those never served first, then the ones served longest ago, ties by id), b 4 each time."""
    a = fanned(gw, "a", [sink.url] * TEN, max_in_flight=TEN)
    backlog(gw, a, "a", 12)
    backlog(gw, create_source(gw, gw.token, sink.url, name="b", max_in_flight=50), "b", 12)
    assert _served(forwarding.take("relay-a", 8)) == ({"a": 4, "b": 4},
                                                      ["d0", "d1", "d2", "d3"])
    assert _served(forwarding.take("relay-b", 8)) == ({"a": 4, "b": 4},
                                                      ["d4", "d5", "d6", "d7"])
    assert _served(forwarding.take("relay-c", 8)) == ({"a": 4, "b": 4},
                                                      ["d8", "d9", "d0", "d1"])


def test_tenants_first_then_sources_then_destinations(gw, op, sink, forwarding):
    """acme's `a` (ten destinations) and `b`, globex's `g`, all with backlogs: a take of 12
    gives globex 6, and acme's 6 go 3 to a (three destinations) and 3 to b."""
    a = fanned(gw, "a", [sink.url] * TEN, max_in_flight=TEN)
    backlog(gw, a, "a", 6)
    backlog(gw, create_source(gw, gw.token, sink.url, name="b", max_in_flight=20), "b", 8)
    other = Http(gw.client, op["globex"])
    backlog(other, create_source(other, other.token, sink.url, name="g", max_in_flight=20),
            "g", 8)
    assert _served(forwarding.take("relay-a", 12)) == ({"a": 3, "b": 3, "g": 6},
                                                       ["d0", "d1", "d2"])


# --- a real relay on the real clock ---------------------------------------------------------

def _goes_out_at_once(http, source: dict, sink: Sink, event_id: str) -> None:
    """`event_id`, accepted now, reaches `sink` (its first attempt starts) within 1 s."""
    before = len(sink.requests)
    started = time.monotonic()
    status, body, _ = deliver(http, source, b'{"idle": true}', event_id=event_id)
    assert status == 202, body
    while len(sink.requests) <= before and time.monotonic() - started < 5:
        time.sleep(0.005)
    took = time.monotonic() - started
    assert len(sink.requests) > before and took < 1.0, f"{event_id}: {took:.2f} s"


def test_ten_destinations_times_a_flood_leave_idle_sources_at_once(live):
    """A source with ten destinations that answer after their 1 s timeout (max_in_flight 1
    each: ten of the relay's 16 slots), 300 events accepted for all ten: another tenant's
    idle source gets its event out within 1 s, three times, and so does the same tenant's
    second, idle source."""
    app, http = live
    slow = Sink(lambda n, r: (time.sleep(3), 200)[1])  # answers after the 1 s timeout
    quick = Sink()
    try:
        flooded = fanned(http["acme"], "flooded", [f"{slow.url}/d{i}" for i in range(TEN)],
                         timeout_seconds=1, max_in_flight=1)
        idle = create_source(http["globex"], http["globex"].token, quick.url, name="idle")
        near = create_source(http["acme"], http["acme"].token, quick.url, name="near")
        ks = app.extensions["keystore"]
        ks.gateway.start_relay(ks.settings, "fanout-fair-relay")
        backlog(http["acme"], flooded, "f", 300)
        deadline = time.monotonic() + 10
        while len({r["path"] for r in slow.requests}) < TEN and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len({r["path"] for r in slow.requests}) == TEN  # every destination's slot
        for n in range(3):
            _goes_out_at_once(http["globex"], idle, quick, f"i{n}")
        _goes_out_at_once(http["acme"], near, quick, "n0")
    finally:
        slow.close()
        quick.close()


def test_a_flood_past_the_relays_slots_leaves_idle_sources_a_spare_slot(live):
    """Ten destinations at the default max_in_flight (4: 40 forwards, past the relay's 16
    slots) answer after their 3 s timeout: every slot is taken, and a slot frees only as a
    forward times out. An idle source's event still starts within 1 s (a spare slot, which
    the flooded source never takes: at most 16 of its forwards are ever in flight), where
    it waited up to 3 s for a slot before."""
    app, http = live
    lock, now_in, most = threading.Lock(), [0], [0]

    def slow_answer(n, r):
        with lock:
            now_in[0] += 1
            most[0] = max(most[0], now_in[0])
        time.sleep(4)  # past the 3 s timeout
        with lock:
            now_in[0] -= 1
        return 200
    slow, quick = Sink(slow_answer), Sink()
    try:
        flooded = fanned(http["acme"], "flooded", [f"{slow.url}/d{i}" for i in range(TEN)],
                         timeout_seconds=3)
        assert {d["max_in_flight"] for d in flooded["destinations"]} == {4}
        idle = create_source(http["globex"], http["globex"].token, quick.url, name="idle")
        near = create_source(http["acme"], http["acme"].token, quick.url, name="near")
        ks = app.extensions["keystore"]
        relay = ks.gateway.start_relay(ks.settings, "spare-relay")
        assert relay.concurrency == 16 and relay.spare == 4
        backlog(http["acme"], flooded, "f", 100)
        deadline = time.monotonic() + 10
        while most[0] < relay.concurrency and time.monotonic() < deadline:
            time.sleep(0.05)
        assert most[0] == relay.concurrency  # every slot is the flood's
        time.sleep(0.5)  # the slots stay taken: a timed-out forward's slot goes to the flood
        for n in range(3):
            _goes_out_at_once(http["globex"], idle, quick, f"i{n}")
        _goes_out_at_once(http["acme"], near, quick, "n0")
        assert most[0] == relay.concurrency  # the flood never took a spare slot
    finally:
        slow.close()
        quick.close()
