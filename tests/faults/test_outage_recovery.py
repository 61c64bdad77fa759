"""A workflow down for more than a minute under a steady stream of signed webhooks, with its
relays SIGKILLed and PostgreSQL stopped abruptly meanwhile, then back (issue 27, "Beside the
features"; docs/reliability.md, "The gateway under faults").

`keystore serve` (no relays of its own) takes a simulated Stripe provider's events at a steady
rate throughout; 2 `keystore relay` processes (each with its alerts' loop) forward them to a
workflow that guards on `Idempotency-Key`; an alert channel of each HTTP kind (Slack's and a
Standard Webhooks one) points at a real sink. The workflow goes down (connection refused) for
OUTAGE_SECONDS; meanwhile both relays are SIGKILLed twice and PostgreSQL (a cluster of the
test's own) is stopped with -m immediate and started again. Then the workflow answers again.

What docs/webhooks/README.md promises, counted: every acknowledged event delivered and acted
on once (a forward again only after an answer no relay could write down, never after a
delivery was written down), nothing lost; one `delivery_failing` issue, opened after the
source's alert_after_seconds and resolved by the recovery; each channel told once that it
opened and once that it resolved (docs/api.md: at most one notice per issue and event).
"""
from __future__ import annotations

import json
import threading
import time

import pytest
import requests
from standardwebhooks.webhooks import Webhook

from keystore_service.storage import migrate
from tests.faults.gateway_harness import RelayProcess
from tests.faults.harness import report
from tests.gateway.guarded_sink import GuardedSink
from tests.gateway.sim_provider import STRIPE_SECRET, SimulatedProvider
from tests.gateway.simulation import (
    DESTINATION_SECRET,
    FERNET_KEY,
    figures,
    read_stored,
    wait_drained,
)
from tests.gateway.support import Sink
from tests.support import Server, new_token

pytestmark = [pytest.mark.faults, pytest.mark.slow]

RATE = 10  # new events a second, before, through and after the outage
BEFORE_SECONDS = 10  # load before the workflow goes down
OUTAGE_SECONDS = 75  # "minutes" scaled down to what CI affords; > 2 probe periods (30 s)
AFTER_SECONDS = 20  # load after it is back
ALERT_AFTER_SECONDS = 10  # the source's: the issue opens 10 s into the outage
TIMEOUT_SECONDS = 2  # the destination's: an attempt's lease is 17 s
SCHEDULE = (0.5, 2.0, 6.0, 15.0)  # the provider's resends (as test_gateway_faults.py)
MAX_SENDS = 8
DRAIN_SECONDS = 120  # a killed relay's leases (17 s), then the recovery's burst
NOTICE_SECONDS = 30  # the resolution's notice after the last delivery: a watch (1 s) + send
CHANNEL_SECRET = "whsec_" + "Y2hhbm5lbC1zZWNyZXQtb2YtMzItYnl0ZXMtLS0tLS0="
ENV = {"KEYSTORE_SECRET_KEY": FERNET_KEY, "KEYSTORE_RELAY_CONCURRENCY": "8",
       "KEYSTORE_RECONCILE_INTERVAL_SECONDS": "0", "KEYSTORE_RELAY_IN_SERVE": "false",
       "KEYSTORE_POOL_SIZE": "4", "KEYSTORE_ALERT_WATCH_SECONDS": "1"}


def _api(server: Server, token: str, method: str, path: str, **kw) -> requests.Response:
    return requests.request(method, server.url + path, timeout=30,
                            headers={"Authorization": f"Bearer {token}"}, **kw)


def _setup(server: Server, token: str, sink: GuardedSink, slack: Sink, hook: Sink) -> str:
    """The source and the two channels through the API; the source's ingest URL."""
    r = _api(server, token, "POST", "/v1/sources", json={
        "name": "stripe-outage", "provider": "stripe", "secrets": [STRIPE_SECRET],
        "destination": {"url": sink.url, "timeout_seconds": TIMEOUT_SECONDS,
                        "secret": DESTINATION_SECRET},
        "retry_window_seconds": 3600, "max_in_flight": 16,
        "alert_after_seconds": ALERT_AFTER_SECONDS})
    assert r.status_code == 201, r.text
    for body in ({"name": "ops-slack", "kind": "slack", "url": slack.url + "/T0/B0/XXXX"},
                 {"name": "n8n-alerts", "kind": "webhook", "url": hook.url,
                  "secret": CHANNEL_SECRET}):
        made = _api(server, token, "POST", "/v1/alert-channels", json=body)
        assert made.status_code == 201, made.text
    return r.json()["source"]["ingest_url"]


def _faults(relays: list[RelayProcess], pg, sink: GuardedSink, marks: dict) -> threading.Thread:
    """The outage, and in it two SIGKILLs of every relay and one PostgreSQL restart."""
    def kill_relays() -> None:
        for relay in relays:
            relay.kill()
        time.sleep(0.5)
        for relay in relays:
            relay.start()
        marks.setdefault("relay_kills", 0)
        marks["relay_kills"] += len(relays)

    def run() -> None:
        time.sleep(BEFORE_SECONDS)
        sink.set_mode("down")
        marks["down"] = time.monotonic()
        time.sleep(15)  # the issue has opened (10 s), and its notices have gone out
        kill_relays()
        time.sleep(10)
        stopped = time.monotonic()
        pg.stop_immediately()
        time.sleep(2)
        pg.start()
        marks["database_down_seconds"] = round(time.monotonic() - stopped, 1)
        time.sleep(15)
        kill_relays()
        time.sleep(max(0.0, marks["down"] + OUTAGE_SECONDS - time.monotonic()))
        sink.set_mode("ok")
        marks["up"] = time.monotonic()
    thread = threading.Thread(target=run, name="outage", daemon=True)
    thread.start()
    return thread


def _issues(server: Server, token: str) -> list[dict]:
    r = _api(server, token, "GET", "/v1/issues", params={"kind": "delivery_failing"})
    assert r.status_code == 200, r.text
    return r.json()["issues"]


def _notice_types(slack: Sink, hook: Sink) -> tuple[list[str], list[str]]:
    """What each channel heard, in order (Slack's text's first words; the webhook's type,
    its signature checked)."""
    heard_slack = [json.loads(r["body"])["text"].split(":")[0] for r in list(slack.requests)]
    heard_hook = []
    for r in list(hook.requests):
        Webhook(CHANNEL_SECRET).verify(r["body"], {k.lower(): v for k, v in r["headers"].items()})
        heard_hook.append(json.loads(r["body"])["type"])
    return heard_slack, heard_hook


def test_an_outage_of_the_workflow_with_relay_kills_and_a_database_restart(private_pg,
                                                                          tmp_path):
    url = private_pg.url
    migrate.upgrade(url)
    token = new_token(url, "outage", "operator")
    sink = GuardedSink(DESTINATION_SECRET, TIMEOUT_SECONDS)
    slack, hook = Sink(), Sink()
    server = Server(url, workers=2, threads=8, log_path=tmp_path / "server.log", env=ENV)
    relays = [RelayProcess(url, ENV, tmp_path / f"relay{n}.log") for n in range(2)]
    marks: dict = {}
    try:
        server.start()
        ingest_url = _setup(server, token, sink, slack, hook)
        for relay in relays:
            relay.start()
        load_seconds = BEFORE_SECONDS + OUTAGE_SECONDS + AFTER_SECONDS
        provider = SimulatedProvider(ingest_url, RATE * load_seconds, rate=RATE,
                                     schedule=SCHEDULE, max_sends=MAX_SENDS, timeout=10,
                                     threads=16, seed=27, prefix="evt_outage_")
        outage = _faults(relays, private_pg, sink, marks)
        started = time.monotonic()
        provider.run(deadline=started + load_seconds + 60)
        outage.join(60)
        assert "up" in marks, "the outage did not end"
        drain = wait_drained(url, sink, provider.acked(),
                             deadline=time.monotonic() + DRAIN_SECONDS)
        deadline = time.monotonic() + NOTICE_SECONDS
        while time.monotonic() < deadline and not (
                [i["state"] for i in _issues(server, token)] == ["resolved"]
                and len(slack.requests) >= 2 and len(hook.requests) >= 2):
            time.sleep(0.5)
        time.sleep(3)  # a second notice of either event would have come by now
        issues = _issues(server, token)
        heard_slack, heard_hook = _notice_types(slack, hook)
        stored = read_stored(url)
        result = figures(provider, sink, stored)
        queued_before_up = [s.event_id for s in provider.stories
                            if s.acked and s.acked_at < marks["up"]]
        arrived = {}
        for f in sink.log:
            if f.acted:
                arrived[f.key] = f.at
        last = max(arrived[e] for e in queued_before_up if e in arrived)
        result.update(
            backend="postgres", outage_seconds=round(marks["up"] - marks["down"], 1),
            relay_kills=marks.get("relay_kills", 0),
            database_down_seconds=marks.get("database_down_seconds"),
            events_accepted_before_recovery=len(queued_before_up),
            recovery_to_last_backlog_delivery_seconds=round(last - marks["up"], 1),
            first_delivery_after_recovery_seconds=round(min(
                t for t in arrived.values() if t >= marks["up"]) - marks["up"], 2),
            drain_seconds=drain, issues=[(i["state"], i["count"]) for i in issues],
            slack_heard=heard_slack, webhook_heard=heard_hook)
        report("gateway_outage_recovery", result)
    finally:
        for relay in relays:
            relay.stop()
        server.stop()
        sink.close()
        slack.close()
        hook.close()
    # nothing lost, each acted on once, no forward after a recorded delivery
    assert result["acknowledged_lost"] == 0, result["lost_examples"]
    assert result["acknowledged"] == result["events"], result["provider_answers"]
    assert result["states"] == {"delivered": result["stored"]}
    assert result["effects"] == result["stored"] and result["double_effects"] == 0
    assert result["effects_of_unknown_events"] == 0 and result["forwards_not_allowed"] == 0
    assert set(result["repeats_by_cause"]) <= {"answer_not_recorded"}
    assert result["bad_signatures_at_the_sink"] == 0
    assert "500" not in result["provider_answers"]
    assert result["events_accepted_before_recovery"] >= RATE * OUTAGE_SECONDS
    # the recovery: the backlog went out within the contract's 60 s of the workflow's return
    assert result["recovery_to_last_backlog_delivery_seconds"] < 60
    # one issue, opened and resolved by itself; one notice each way on each channel
    assert [i["state"] for i in issues] == ["resolved"], issues
    assert heard_slack == ["Issue opened", "Issue resolved"], heard_slack
    assert heard_hook == ["issue.opened", "issue.resolved"], heard_hook
