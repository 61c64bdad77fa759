"""timeout_seconds bounds the whole forward (issue 25, item 2), with real trickling sinks on
loopback and both backends: each phase trickled ends at the deadline as a "timeout", and a
real relay over a destination that never finishes its answer never forwards an event twice
at once nor more than max_in_flight at once."""
from __future__ import annotations

import json
import time

import pytest

from keystore_service.app import create_app
from keystore_service.domain.records import SECOND
from keystore_service.settings import Settings
from tests.support import T0, Http

from .support import KEY, create_source, deliver, delivery, pump, signed
from .trickling_sink import TricklingSink

MARGIN = 1.0  # past the deadline: the reaper's wake-up and a loaded machine's scheduling


@pytest.mark.parametrize("mode", ["status", "headers", "body", "tls"])
def test_a_trickled_forward_ends_at_its_timeout(gw, forwarding, mode):
    sink = TricklingSink(mode)
    try:
        url = sink.url.replace("http:", "https:") if mode == "tls" else sink.url
        source = create_source(gw, gw.token, url,
                               destination={"url": url, "timeout_seconds": 2})
        deliver(gw, source)
        started = time.monotonic()
        assert pump(forwarding) == ["retry"]
        took = time.monotonic() - started
        assert 1.9 < took < 2 + MARGIN, took
        (attempt,) = delivery(gw)["attempts"]
        assert attempt["error"] == "timeout" and attempt.get("status_code") is None
    finally:
        sink.close()


SPEED = 4  # the app's clock runs 4 times as fast as real time: a lease of 16 s lasts 4 s


def test_a_relay_never_forwards_an_event_twice_at_once_nor_past_max_in_flight(
        database_url, backend):
    """20 events, max_in_flight 4, timeout 1 s, a destination that trickles its headers
    for 30 s. Before, each forward stayed open past its lease (1 + 15 s), the event was
    taken again while it was open and the source had 8 forwards open at once; now each
    forward is cut at 1 s, and the sink counts, as each request arrives, the connections
    still open: never more than 4, never two of one event. The clock is sped up so that
    leases run out within the test (every lease, backoff and the 1 s timeout kept as they
    are, the timeout in real seconds: the lease is 4 times as generous as in service)."""
    started = time.monotonic()
    app = create_app(Settings(database_url=database_url, secret_key=KEY,
                              token_cache_seconds=0),
                     lambda: T0 + int((time.monotonic() - started) * SPEED * SECOND))
    ks = app.extensions["keystore"]
    sink = TricklingSink("headers")
    relay = None
    try:
        ks.accounts.create_tenant("acme", T0)
        http = Http(app.test_client(), ks.accounts.create_token("acme", "operator", None, T0))
        source = create_source(http, http.token, sink.url, max_in_flight=4,
                               destination={"url": sink.url, "timeout_seconds": 1})
        path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
        for n in range(20):
            body = json.dumps({"id": n}).encode()
            assert app.test_client().post(path, data=body,
                                          headers=signed(body, f"e{n}")).status_code == 202
        relay = ks.gateway.start_relay(ks.settings, "deadline-relay")
        time.sleep(6)  # 24 s on the app's clock: past every first lease (16 s)
        assert sink.twice == [] and sink.most_open <= 4, (sink.twice, sink.most_open)
        assert len(sink.requests) >= 12  # three rounds of four, at least
        attempts = [a for n in range(20) for a in delivery(http, f"e{n}")["attempts"]]
        assert attempts and {a["error"] for a in attempts} == {"timeout"}
        assert relay.counts["lost_lease"] == 0
    finally:
        sink.close()
        if relay is not None:
            relay.stop()
        ks.database.engine.dispose()
