"""Fair forwarding (issue 25, item 3), on both backends: a take serves only sources with
room, tenants first and then their sources in turn, so one source's backlog for a slow
destination never keeps another source's event waiting. With real slow sinks on loopback
and a real relay on the real clock, and the take itself on the test clock."""
from __future__ import annotations

import json
import threading
import time

from keystore_service.gateway.relay import Relay
from tests.support import Http

from .support import Sink, create_source, deliver


def backlog(http, source, prefix: str, n: int) -> None:
    for i in range(n):
        status, body, _ = deliver(http, source, json.dumps({"i": i}).encode(),
                                  event_id=f"{prefix}{i}")
        assert status == 202, body


def test_an_idle_sources_event_goes_out_at_once_beside_a_timing_out_backlog(live):
    """docs/webhooks/README.md's target: 300 events queued for a destination that answers after its
    timeout (another tenant's); an event of an idle source starts within 1 s, every time."""
    app, http = live
    slow = Sink(lambda n, r: (time.sleep(3), 200)[1])  # answers after the 1 s timeout
    quick = Sink()
    try:
        source = create_source(http["acme"], http["acme"].token, slow.url, name="slow",
                               max_in_flight=8, destination={"url": slow.url,
                                                             "timeout_seconds": 1})
        idle = create_source(http["globex"], http["globex"].token, quick.url, name="idle")
        ks = app.extensions["keystore"]
        ks.gateway.start_relay(ks.settings, "fair-relay")
        backlog(http["acme"], source, "s", 300)
        deadline = time.monotonic() + 20
        while len(slow.requests) < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(slow.requests) >= 8  # the slow source's slots are all taken
        for n in range(3):
            started = time.monotonic()
            status, _, _ = deliver(http["globex"], idle, b'{"n": %d}' % n, event_id=f"i{n}")
            assert status == 202
            while len(quick.requests) <= n and time.monotonic() - started < 5:
                time.sleep(0.005)
            took = time.monotonic() - started
            assert len(quick.requests) > n and took < 1.0, f"event {n}: {took:.2f} s"
    finally:
        slow.close()
        quick.close()


def test_sources_with_backlogs_are_served_in_turn_tenants_first(live):
    """Two sources of one tenant and one of another, 20 events each queued before the
    relay starts, destinations that take 50 ms, a relay of 2: the forwards interleave, the
    other tenant gets half of them and each source of the first a quarter (round robin by
    tenant, then by source), where the oldest-first take sent one source's whole backlog
    first."""
    app, http = live
    order: list[str] = []
    lock = threading.Lock()

    def sink_of(name: str) -> Sink:
        def answer(n, r):
            with lock:
                order.append(name)
            time.sleep(0.05)
            return 200
        return Sink(answer)
    sinks = {name: sink_of(name) for name in ("a1", "a2", "g")}
    try:
        owners = {"a1": "acme", "a2": "acme", "g": "globex"}
        for name, tenant in owners.items():  # oldest first: all of a1, then a2, then g
            source = create_source(http[tenant], http[tenant].token, sinks[name].url,
                                   name=name, max_in_flight=4)
            backlog(http[tenant], source, name, 20)
        ks = app.extensions["keystore"]
        relay = Relay(ks.gateway.forwarding, 2, "turns-relay").start()
        try:
            deadline = time.monotonic() + 30
            while len(order) < 24 and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            relay.stop(wait=5)
        first = order[:24]
        assert len(first) == 24, order
        counts = {name: first.count(name) for name in owners}
        assert 10 <= counts["g"] <= 14 and 4 <= counts["a1"] <= 8 and 4 <= counts["a2"] <= 8, \
            first
    finally:
        for s in sinks.values():
            s.close()


# --- the take itself, on the test clock -----------------------------------------------------

def test_a_full_sources_backlog_does_not_hide_another_sources_event(gw, op, sink, forwarding):
    """A source at its max_in_flight with 50 older due events; another tenant's one event
    is taken by a take of one, where the oldest-first take found only the full source's."""
    full = create_source(gw, gw.token, sink.url, name="full", max_in_flight=2)
    backlog(gw, full, "f", 52)
    assert len(forwarding.take("relay-a", 2)) == 2  # full now has 2 in flight
    other = Http(gw.client, op["globex"])
    idle = create_source(other, other.token, sink.url, name="idle")
    deliver(other, idle, event_id="lonely")
    (job,), left = forwarding.take_some("relay-b", 1)
    assert (job.source.name, job.event.event_id, left) == ("idle", "lonely", True)
    assert forwarding.take_some("relay-c", 16) == ([], True)  # full's left, for later


def test_one_take_interleaves_tenants_then_sources(gw, op, sink, forwarding):
    """One take of 8 from three backlogs (acme's a1 and a2 older than globex's g): by
    tenant first, then by source: globex 4, a1 2, a2 2. The next take goes on in turn."""
    other = Http(gw.client, op["globex"])
    for http, name in ((gw, "a1"), (gw, "a2"), (other, "g")):
        backlog(http, create_source(http, http.token, sink.url, name=name,
                                    max_in_flight=10), name, 12)
    taken = forwarding.take("relay-a", 8)
    names = [job.source.name for job in taken]
    assert {n: names.count(n) for n in ("a1", "a2", "g")} == {"a1": 2, "a2": 2, "g": 4}
    taken = forwarding.take("relay-b", 6)
    names = [job.source.name for job in taken]
    assert {n: names.count(n) for n in ("a1", "a2", "g")} == {"a1": 2, "a2": 1, "g": 3} \
        or {n: names.count(n) for n in ("a1", "a2", "g")} == {"a1": 1, "a2": 2, "g": 3}
