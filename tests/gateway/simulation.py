"""What the gateway's end-to-end runs share (tests/gateway/test_simulated_provider.py and
tests/faults/test_gateway_faults.py): a Stripe source made through the API of a real server,
the stored events and attempts read straight from the database, waiting for the queue to
drain, and the figures of a run, each of them counted rather than assumed."""
from __future__ import annotations

import base64
import time
from collections import Counter
from dataclasses import dataclass

import requests
from sqlalchemy import select

from keystore_service.storage.db import create
from keystore_service.storage.tables import hook_attempts, hook_events
from tests.support import new_token

from .guarded_sink import GuardedSink
from .sim_provider import STRIPE_SECRET, SimulatedProvider

FERNET_KEY = "cNk6cVlTCFCk0NKWaFUBSi1_dBbOG9Z-mUbGkN9yQBw="  # KEYSTORE_SECRET_KEY of the runs
DESTINATION_SECRET = "whsec_" + base64.b64encode(b"d" * 32).decode()  # forwards are signed


def stripe_source(server_url: str, database_url: str, sink: GuardedSink, *,
                  timeout_seconds: int, max_in_flight: int, name: str = "stripe-sim") -> str:
    """Create the source through POST /v1/sources with an operator's token; its ingest URL."""
    token = new_token(database_url, "sim", "operator")
    r = requests.post(server_url + "/v1/sources", headers={"Authorization": f"Bearer {token}"},
                      json={"name": name, "provider": "stripe", "secrets": [STRIPE_SECRET],
                            "destination": {"url": sink.url, "timeout_seconds": timeout_seconds,
                                            "secret": DESTINATION_SECRET},
                            "retry_window_seconds": 3600, "max_in_flight": max_in_flight},
                      timeout=30)
    assert r.status_code == 201, r.text
    return r.json()["source"]["ingest_url"]


@dataclass
class Stored:
    """The database's view: each event's state and forward count, and the attempts written
    down (event id, number) -> (status code, error)."""

    states: dict[str, str]
    attempts: dict[tuple[str, int], tuple]

    def delivered_attempt(self) -> dict[str, int]:
        """event id -> the number of its attempt that was written down as a 2xx."""
        out = {}
        for (event_id, number), (status, _) in self.attempts.items():
            if status is not None and 200 <= status <= 299:
                out[event_id] = min(number, out.get(event_id, number))
        return out


def read_stored(database_url: str) -> Stored:
    engine = create(database_url, pool_size=1)
    try:
        with engine.connect() as conn:
            states = {e: s for e, s in conn.execute(
                select(hook_events.c.event_id, hook_events.c.state))}
            rows = conn.execute(select(hook_events.c.event_id, hook_attempts.c.number,
                                       hook_attempts.c.status_code, hook_attempts.c.error)
                                .join(hook_events, hook_events.c.id == hook_attempts.c.event_pk))
            attempts = {(e, n): (status, error) for e, n, status, error in rows}
    finally:
        engine.dispose()
    return Stored(states, attempts)


def wait_drained(database_url: str, sink: GuardedSink, acked: set[str],
                 deadline: float) -> float:
    """Wait until every stored event is delivered or failed and every acknowledged one acted
    at the sink, or until `deadline` (monotonic); the seconds it took."""
    started = time.monotonic()
    while time.monotonic() < deadline:
        try:
            stored = read_stored(database_url)
        except Exception:  # the database may still be coming back
            time.sleep(0.5)
            continue
        open_ = [e for e, s in stored.states.items() if s in ("queued", "delivering")]
        if not open_ and acked <= set(sink.effects):
            break
        time.sleep(0.25)
    return round(time.monotonic() - started, 1)


def figures(provider: SimulatedProvider, sink: GuardedSink, stored: Stored) -> dict:
    """The run's figures. `forwards_not_allowed` are forwards of an event after an attempt
    of it was written down as delivered (never allowed without a redelivery); `repeats` are
    forwards that reached the workflow for an event it had already acted on, by what made
    them necessary: the previous forward timed out (`after_a_timeout`), or it was answered
    but the relay died or lost its database before writing that down (`answer_not_recorded`).
    """
    acked = provider.acked()
    delivered = stored.delivered_attempt()
    not_allowed = [f for f in sink.log
                   if f.key in delivered and f.attempt > delivered[f.key]]
    repeats: Counter = Counter()
    by_key: dict[str, list] = {}
    for f in sorted(sink.log, key=lambda f: f.at):
        if f.mode in ("ok", "slow"):
            by_key.setdefault(f.key, []).append(f)
    for forwards in by_key.values():
        for previous in forwards[:-1]:  # each forward after the first is a repeat
            if previous.mode == "slow":
                repeats["after_a_timeout"] += 1
            elif delivered.get(previous.key) == previous.attempt:
                repeats["after_a_recorded_delivery"] += 1  # counted as not allowed too
            else:
                repeats["answer_not_recorded"] += 1
    refused = sum(1 for status, error in stored.attempts.values()
                  if status is None and error == "no connection")
    lost = sorted(acked - {e for e, s in stored.states.items() if s == "delivered"}
                  | (acked - set(sink.effects)))
    return {
        "events": len(provider.stories),
        "provider_sends": provider.sends(),
        "provider_resends": provider.sends() - len(provider.stories),
        "provider_answers": {str(k): v for k, v in sorted(provider.answers.items(), key=str)},
        "ingest_2xx_bodies": dict(provider.bodies),
        "acknowledged": len(acked),
        "unacknowledged_examples": [(s.event_id, s.answers) for s in provider.stories
                                    if not s.acked][:3],
        "not_acknowledged_but_stored": len(set(stored.states) - acked),
        # acknowledged only by a "duplicate": the send that stored it got no 202 back (its
        # worker was killed, or the database went away at its commit, answering 503)
        "acknowledged_without_a_202": sum(1 for s in provider.stories
                                          if s.acked and 202 not in s.answers),
        "stored": len(stored.states),
        "states": dict(Counter(stored.states.values())),
        "acknowledged_lost": len(lost),
        "lost_examples": lost[:5],
        "effects": sum(sink.effects.values()),
        "double_effects": sum(n - 1 for n in sink.effects.values() if n > 1),
        "effects_of_unknown_events": len(set(sink.effects) - set(stored.states)),
        "forwards": len(sink.log) + refused,
        "forwards_reaching_the_sink_by_mode": sink.forwards_by_mode(),
        "forwards_refused_while_down": refused,
        "attempts_written_down": len(stored.attempts),
        "attempts_written_down_by_answer": dict(Counter(
            str(status) if status is not None else error
            for status, error in stored.attempts.values())),
        "repeats": sum(repeats.values()),
        "repeats_by_cause": dict(repeats),
        "forwards_not_allowed": len(not_allowed),
        "bad_signatures_at_the_sink": sink.bad_signatures,
    }
