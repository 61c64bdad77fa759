"""The gateway under faults, with real processes and real kills: a simulated Stripe provider
sends a steady load of signed events (with its copies and resends) to `keystore serve`,
whose events are forwarded by relays to a workflow that acts once per `Idempotency-Key`.

- kills (SQLite and PostgreSQL): SIGKILL of `keystore relay` processes, chosen while they are
  forwarding, each started again half a second later; and SIGKILL of serve's gunicorn
  workers (each runs a relay too, and takes ingests);
- database restarts: PostgreSQL (a cluster of the test's own) stopped abruptly and started
  again 3 times, relays only in `keystore relay` processes.

Then the faults stop and the queue drains. 0 acknowledged events lost, 0 double effects at
the guarded workflow, 0 forwards after an attempt was written down as delivered, every stored
event delivered; the repeats (forwards the workflow had already acted on) are counted.
"""
from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest

from keystore_service.storage import migrate
from tests.faults.gateway_harness import Kills, RelayProcess, kill_loop
from tests.faults.harness import report
from tests.gateway.guarded_sink import GuardedSink
from tests.gateway.sim_provider import SimulatedProvider
from tests.gateway.simulation import (
    DESTINATION_SECRET,
    FERNET_KEY,
    figures,
    read_stored,
    stripe_source,
    wait_drained,
)
from tests.support import Server

pytestmark = [pytest.mark.faults, pytest.mark.slow]

TIMEOUT_SECONDS = 2  # the source's: an attempt's lease is this + 15 s (docs/webhooks/README.md)
RATE = 30  # new events a second: a steady load through every fault
LOAD_SECONDS = 30  # the faults happen while events arrive, then stop with the new events
# The provider's resends, up to 8 sends of an event: 38.5 s from the first failure to the
# last resend, more than an outage and the gap to the next even when two concurrent copies
# failed too (real providers go on for hours or days; the run has a minute)
SCHEDULE = (0.5, 2.0, 6.0, 15.0)
MAX_SENDS = 8
DRAIN_SECONDS = 90  # a killed relay's events wait for their 17 s lease, then backoff
ENV = {"KEYSTORE_SECRET_KEY": FERNET_KEY, "KEYSTORE_RELAY_CONCURRENCY": "8",
       "KEYSTORE_RECONCILE_INTERVAL_SECONDS": "0"}


def work() -> float:
    return random.uniform(0.05, 0.3)  # the workflow's time per event: forwards are in flight


def run_load(server: Server, database_url: str, sink: GuardedSink, faults,
             load_seconds: int = LOAD_SECONDS) -> tuple:
    """The provider's load for LOAD_SECONDS with `faults(stop)` running beside it, then the
    drain; (provider, stored, sending seconds, drain seconds)."""
    ingest_url = stripe_source(server.url, database_url, sink,
                               timeout_seconds=TIMEOUT_SECONDS, max_in_flight=32)
    provider = SimulatedProvider(ingest_url, RATE * load_seconds, rate=RATE, schedule=SCHEDULE,
                                 max_sends=MAX_SENDS, timeout=10, threads=24, seed=16)
    stop = threading.Event()
    started = time.monotonic()
    threads = faults(stop)
    try:
        provider.run(deadline=started + load_seconds + 60)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    sending = round(time.monotonic() - started, 1)
    drain = wait_drained(database_url, sink, provider.acked(),
                         deadline=time.monotonic() + DRAIN_SECONDS)
    return provider, read_stored(database_url), sending, drain


def check(result: dict) -> None:
    assert result["acknowledged_lost"] == 0, result["lost_examples"]
    assert result["double_effects"] == 0 and result["effects_of_unknown_events"] == 0
    assert result["forwards_not_allowed"] == 0
    assert result["states"] == {"delivered": result["stored"]}  # every one, once faults stop
    assert result["effects"] == result["stored"] >= result["acknowledged"]
    assert result["acknowledged"] == result["events"], result["provider_answers"]
    assert set(result["repeats_by_cause"]) <= {"answer_not_recorded"}
    assert "500" not in result["provider_answers"]
    assert result["ingest_2xx_bodies"].get("held", 0) == 0
    assert result["bad_signatures_at_the_sink"] == 0


def test_relay_and_worker_kills_under_load(database_url, backend, tmp_path):
    sink = GuardedSink(DESTINATION_SECRET, TIMEOUT_SECONDS, work=work)
    # serve's relays forward 2 at once each, so that the relay processes (8 each) carry
    # most forwards: both kinds of kill then cut forwards in flight
    server = Server(database_url, workers=2, threads=8, log_path=tmp_path / "server.log",
                    env={**ENV, "KEYSTORE_RELAY_CONCURRENCY": "2"})
    relays = [RelayProcess(database_url, ENV, tmp_path / f"relay{n}.log") for n in range(2)]
    relay_kills, worker_kills = Kills(), Kills()
    try:
        server.start()
        for relay in relays:
            relay.start()

        def kill_relay(pid: int) -> None:
            relay = next(r for r in relays if r.pid == pid)
            relay.kill()
            time.sleep(0.5)
            relay.start()

        def workers() -> list[int]:
            pids = server.worker_pids()
            return pids if len(pids) >= 2 else []  # never both at once

        def faults(stop):
            return [kill_loop(stop, sink, 2.0, random.Random(1), lambda: [
                        r.pid for r in relays if r.pid], kill_relay, relay_kills),
                    kill_loop(stop, sink, 3.0, random.Random(2), workers,
                              lambda pid: os.kill(pid, signal.SIGKILL), worker_kills)]
        provider, stored, sending, drain = run_load(server, database_url, sink, faults)
        result = figures(provider, sink, stored)
        result.update(backend=backend, relay_kills=relay_kills.made,
                      relay_kills_mid_forward=relay_kills.mid_forward,
                      worker_kills=worker_kills.made,
                      worker_kills_mid_forward=worker_kills.mid_forward,
                      sending_seconds=sending, drain_seconds=drain)
        report(f"gateway_kills_{backend}", result)
    finally:
        for relay in relays:
            relay.stop()
        server.stop()
        sink.close()
    check(result)
    assert relay_kills.made >= 8 and worker_kills.made >= 5
    assert relay_kills.mid_forward >= relay_kills.made // 2  # most kills cut a forward


def test_database_restarts_under_load(private_pg, tmp_path):
    url = private_pg.url
    migrate.upgrade(url)
    sink = GuardedSink(DESTINATION_SECRET, TIMEOUT_SECONDS, work=work)
    env = {**ENV, "KEYSTORE_RELAY_IN_SERVE": "false", "KEYSTORE_POOL_SIZE": "4"}
    server = Server(url, workers=2, threads=8, log_path=tmp_path / "server.log", env=env)
    relays = [RelayProcess(url, env, tmp_path / f"relay{n}.log") for n in range(2)]
    downtime: list[tuple[float, float]] = []  # (stopped, started again), monotonic
    try:
        server.start()
        for relay in relays:
            relay.start()

        def restarts(stop: threading.Event) -> None:
            for _ in range(3):
                time.sleep(6)
                stopped = time.monotonic()
                private_pg.stop_immediately()
                time.sleep(2)
                private_pg.start()
                downtime.append((stopped, time.monotonic()))

        def faults(stop):
            thread = threading.Thread(target=restarts, args=(stop,), daemon=True)
            thread.start()
            return [thread]
        provider, stored, sending, drain = run_load(server, url, sink, faults,
                                                    load_seconds=40)
        result = figures(provider, sink, stored)
        # from each start to the provider's next 2xx (None: none came)
        recovery = [next((round(t - up, 3) for t in sorted(provider.answered_2xx_at)
                          if t >= up), None) for _, up in downtime]
        result.update(backend="postgres", database_restarts=len(downtime),
                      database_down_seconds=[round(b - a, 1) for a, b in downtime],
                      recovery_seconds=recovery, sending_seconds=sending,
                      drain_seconds=drain)
        report("gateway_database_restarts", result)
    finally:
        for relay in relays:
            relay.stop()
        server.stop()
        sink.close()
    check(result)
    assert len(downtime) == 3
    # answers that came while the database was down were written down once it was back,
    # within their leases: no event was forwarded again (34 were, before relay.py did that)
    assert result["repeats"] == 0
    # the provider's next 2xx came soon after each start
    assert all(r is not None and r < 5 for r in result["recovery_seconds"])


def test_an_answer_that_comes_while_the_database_is_down_is_written_down_after(
        private_pg, tmp_path):
    """The workflow acts and answers 200 while PostgreSQL is down: the relay writes the
    delivery down once the database is back, within the attempt's lease, instead of letting
    the lease run out and forwarding the event again (a second run of the workflow)."""
    url = private_pg.url
    migrate.upgrade(url)
    sink = GuardedSink(DESTINATION_SECRET, 10)
    server = Server(url, workers=1, threads=4, log_path=tmp_path / "server.log", env=ENV)
    try:
        server.start()
        ingest_url = stripe_source(server.url, url, sink, timeout_seconds=10,
                                   max_in_flight=4)  # an attempt's lease: 10 + 15 s
        sink.gate.clear()
        provider = SimulatedProvider(ingest_url, 1, concurrent_share=0, after_ack_share=0)
        provider.run(deadline=time.monotonic() + 10)
        deadline = time.monotonic() + 10
        while not sink.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sink.in_flight, "the event was not forwarded"
        private_pg.stop_immediately()
        sink.gate.set()  # the workflow acted, and answers 200 now
        time.sleep(2)
        private_pg.start()
        back = time.monotonic()
        drain = wait_drained(url, sink, provider.acked(), deadline=back + 40)
        stored = read_stored(url)
    finally:
        server.stop()
        sink.close()
    assert stored.states == {provider.stories[0].event_id: "delivered"}
    assert [f.attempt for f in sink.log] == [1], "forwarded again after its lease ran out"
    assert drain < 10
