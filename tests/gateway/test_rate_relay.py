"""A destination's rate with real relays and real time (issue 29, "Rates per destination"),
on both backends, against a sink on loopback that notes when each forward arrives: two
`keystore relay` processes together hold a source's rate (the arrivals show it) and deliver
its backlog in acceptance order, while a source without a rate beside it drains at full
speed; a PATCH that clears the rate lets the rest of the backlog drain at once."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from keystore_service.app import create_app
from keystore_service.gateway.relay import Relay
from keystore_service.settings import Settings
from tests.support import KEYSTORE, Http

from .support import KEY, Sink, create_source, deliver


@pytest.fixture
def live(database_url):
    """The app on the real clock (the events are due now, as the relays' clocks say)."""
    app = create_app(Settings(database_url=database_url, secret_key=KEY, token_cache_seconds=0))
    accounts = app.extensions["keystore"].accounts
    now = int(time.time() * 1e6)
    accounts.create_tenant("acme", now)
    yield Http(app.test_client(), accounts.create_token("acme", "operator", None, now)), app
    app.extensions["keystore"].database.engine.dispose()


@pytest.fixture
def timed():
    """A sink whose requests carry their arrival time (monotonic seconds) as "at"."""
    sink = Sink(lambda n, r: (r.__setitem__("at", time.monotonic()), 200)[1])
    yield sink
    sink.close()


def _backlog(http, sink, name: str, rate, n: int, **extra) -> None:
    made = create_source(http, http.token, sink.url, name=name,
                         destination={"url": sink.url + "/" + name, "rate": rate}, **extra)
    for i in range(1, n + 1):
        status, answer, _ = deliver(http, made, json.dumps({"n": i}).encode(),
                                    event_id=f"{name}-{i}")
        assert status == 202, answer


def _arrivals(sink, name: str) -> list[tuple[float, str]]:
    return [(r["at"], r["headers"].get("X-Keystore-Event-Id") or json.loads(r["body"])["n"])
            for r in list(sink.requests) if r["path"].endswith("/" + name)]


def _most_in_a_second(times: list[float]) -> int:
    return max(sum(1 for u in times if t <= u < t + 1.0) for t in times)


def _wait(sink, n: int, within: float) -> None:
    deadline = time.monotonic() + within
    while len(sink.requests) < n and time.monotonic() < deadline:
        time.sleep(0.02)


def test_two_relay_processes_hold_a_rate_and_do_not_hold_another_source(
        live, timed, database_url):
    http, _ = live
    _backlog(http, timed, "paced", {"per_second": 5}, 30, max_in_flight=1)  # in order
    _backlog(http, timed, "free", None, 30, max_in_flight=10)
    env = {**os.environ, "KEYSTORE_DATABASE_URL": database_url, "KEYSTORE_SECRET_KEY": KEY}
    relays = [subprocess.Popen([KEYSTORE, "relay", "--concurrency", "4", "--progress", "0"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True) for _ in range(2)]
    try:
        _wait(timed, 60, within=30)
    finally:
        for relay in relays:
            os.killpg(relay.pid, signal.SIGTERM)
        errors = [relay.communicate(timeout=30)[1].decode() for relay in relays]
    paced, free = _arrivals(timed, "paced"), _arrivals(timed, "free")
    assert len(paced) == 30 and len(free) == 30, errors
    times = [at for at, _ in paced]
    # 5 at once (the burst), then one every 200 ms: never more than 5 + 5 in a second, and
    # the 30 take about (30 - 5) / 5 = 5 s
    assert _most_in_a_second(times) <= 10, times
    assert times[-1] - times[0] >= 4.5, times
    assert [n for _, n in paced] == list(range(1, 31))  # in acceptance order
    # the source without a rate is not held behind it: all of it within about a second
    free_times = [at for at, _ in free]
    assert max(free_times) - min(times + free_times) < 2.0, (free_times, times)


def test_a_patch_that_clears_the_rate_lets_the_backlog_drain(live, timed):
    http, app = live
    _backlog(http, timed, "shop", {"per_second": 2}, 20)
    relay = Relay(app.extensions["keystore"].gateway.forwarding, 4, "rate-relay").start()
    try:
        time.sleep(1.2)  # the burst of 2, then one every 500 ms: 4 or so
        held = len(timed.requests)
        assert 2 <= held <= 5, held
        r = http.client.patch("/v1/sources/shop", headers=http._auth(...),
                              json={"destination": {"url": timed.url + "/shop", "rate": None}})
        assert r.status_code == 200 and r.get_json()["source"]["destination"]["rate"] is None
        cleared = time.monotonic()
        _wait(timed, 20, within=10)
    finally:
        relay.stop()
    assert len(timed.requests) == 20
    assert max(at for at, _ in _arrivals(timed, "shop")) - cleared < 1.5  # not 8 s more
