"""A provider that behaves like the real ones against a real `keystore serve` (2 workers, each
with its relay), on SQLite and PostgreSQL: 1,000 Stripe-signed events, each sent up to 5
times (copies together, copies after a 202, resends on non-2xx and timeouts at 0.1, 0.3, 1,
2 s), while the workflow behind the gateway is down (connection refused), answers 500, 429
with Retry-After, and takes longer than the source's 1 s timeout, then recovers.

Every event the key store acknowledged reaches the workflow; the workflow, deduping on
`Idempotency-Key`, acts exactly once per event; no event is forwarded after an attempt of it
was written down as delivered. The forwards that reached the workflow again for an event it
had acted on (the repeats: a timeout is an unknown outcome) are counted and reported.
"""
from __future__ import annotations

import time

import pytest

from tests.faults.harness import report
from tests.support import Server

from .guarded_sink import GuardedSink
from .sim_provider import SimulatedProvider
from .simulation import (
    DESTINATION_SECRET,
    FERNET_KEY,
    figures,
    read_stored,
    stripe_source,
    wait_drained,
)

pytestmark = pytest.mark.slow

EVENTS = 1000
TIMEOUT_SECONDS = 1  # the source's timeout: the sink's "slow" answers come 0.7 s after it
# The workflow's troubles, in order, from the first send on (then it recovers): long enough
# for hundreds of forwards to meet each, short enough that the run drains within a minute.
PHASES = [("down", 3.0), ("500", 2.5), ("429", 2.5), ("slow", 3.0)]
RATE = 100  # new events a second: their first sends span all of the workflow's troubles
SEND_SECONDS = 60  # the provider's sends end by then (they take 10-25 s on a 2-core machine)
DRAIN_SECONDS = 75  # backoff after ~6 failed attempts is up to 32 s: ample, and bounded


def test_a_thousand_events_through_a_failing_workflow(database_url, backend, tmp_path):
    sink = GuardedSink(DESTINATION_SECRET, TIMEOUT_SECONDS)
    server = Server(database_url, workers=2, threads=8, log_path=tmp_path / "server.log",
                    env={"KEYSTORE_SECRET_KEY": FERNET_KEY,
                         "KEYSTORE_RELAY_CONCURRENCY": "16"})
    provider = None
    try:
        server.start()
        ingest_url = stripe_source(server.url, database_url, sink,
                                   timeout_seconds=TIMEOUT_SECONDS, max_in_flight=32)
        provider = SimulatedProvider(ingest_url, EVENTS, rate=RATE, threads=16)
        started = time.monotonic()
        phases = sink.run_phases(PHASES)
        provider.run(deadline=started + SEND_SECONDS)
        sending = round(time.monotonic() - started, 1)
        phases.join()
        drain = wait_drained(database_url, sink, provider.acked(),
                             deadline=time.monotonic() + DRAIN_SECONDS)
        stored = read_stored(database_url)
        result = figures(provider, sink, stored)
        result.update(backend=backend, sending_seconds=sending, drain_seconds=drain,
                      sink_phases=[f"{m} {s} s" for m, s in PHASES],
                      source_timeout_seconds=TIMEOUT_SECONDS)
        report(f"simulated_provider_{backend}", result)
    finally:
        if provider is not None:
            provider.stop()
        server.stop()
        sink.close()
    assert result["acknowledged"] == EVENTS, result["provider_answers"]
    assert result["acknowledged_lost"] == 0, result["lost_examples"]
    assert result["states"] == {"delivered": result["stored"]}  # drained, none given up
    assert result["effects"] == result["stored"] and result["double_effects"] == 0
    assert result["effects_of_unknown_events"] == 0
    assert result["forwards_not_allowed"] == 0
    assert result["forwards"] == result["attempts_written_down"]  # each forward's end kept
    assert result["repeats"] == sink.repeats()
    assert set(result["repeats_by_cause"]) <= {"after_a_timeout"}  # nothing was killed here
    # the provider's copies and resends were met as duplicates, never as changed bodies
    assert result["ingest_2xx_bodies"].get("held", 0) == 0
    assert result["ingest_2xx_bodies"]["duplicate"] > 0
    assert not [a for a in result["provider_answers"] if a in ("500", "401", "400")]
    assert result["bad_signatures_at_the_sink"] == 0
    # the workflow's troubles were all met by real forwards
    met = result["forwards_reaching_the_sink_by_mode"]
    assert result["forwards_refused_while_down"] > 0 and met.get("500") and met.get("429")
    assert met.get("slow") and result["repeats"] > 0
