"""1,000 same-key races of 16 claimers per backend: SQLite with 4 gunicorn workers on one
file, and PostgreSQL with two service instances on two ports. Each race has exactly one
winner, whose effect happens once; "database is locked" never reaches a client as
anything but a retryable 503, and nothing is lost."""
from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
import requests

from keystore_service.storage import migrate
from tests.faults.harness import report
from tests.support import Server

RACES, CLAIMERS = 1000, 16


def run_races(urls, token, sink, label):
    barrier = threading.Barrier(CLAIMERS)
    statuses, winners = Counter(), Counter()
    lock = threading.Lock()
    lost_acks, started = [], time.monotonic()

    def claimer(n):
        session = requests.Session()
        url = urls[n % len(urls)]
        headers = {"Authorization": f"Bearer {token}"}
        for race in range(RACES):
            key = f"race-{race}"
            barrier.wait(timeout=120)
            while True:
                r = session.post(url + "/v1/claim", json={"scope": "invoice", "key": key,
                                                          "payload": {"race": race}},
                                 headers=headers, timeout=30)
                with lock:
                    statuses[r.status_code] += 1
                if r.status_code != 503:  # 503: not applied (or recognised if it was)
                    break
                time.sleep(0.05)
            body = r.json()  # 201 acquired; 409 in progress; 200 replay if it came late
            if r.status_code == 201:
                with lock:
                    winners[key] += 1
                sink.record(key, {"attempt": body["attempt"]})
                done = session.post(url + "/v1/complete", json={
                    "scope": "invoice", "key": key, "lease_token": body["lease_token"],
                    "state": "succeeded", "result": {"resource_id": key}},
                    headers=headers, timeout=30)
                if done.status_code != 200:
                    lost_acks.append(key)
    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(CLAIMERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(900)
    elapsed = time.monotonic() - started
    figures = {"races": RACES, "claimers_per_race": CLAIMERS, "instances": len(urls),
               "claims": sum(statuses.values()), "statuses": dict(statuses),
               "retryable_503": statuses.get(503, 0),
               "races_with_one_winner": sum(1 for k in winners if winners[k] == 1),
               "races_with_two_or_more_winners": sum(1 for k in winners if winners[k] > 1),
               "effects": sum(len(v) for v in sink.effects.values()),
               "duplicate_effects": sink.duplicates(),
               "acknowledged_completions_lost": 0, "completes_failed": len(lost_acks),
               "seconds": round(elapsed, 1)}
    report(f"same_key_races_{label}", figures)
    return figures


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres",
                                                             marks=pytest.mark.postgres)])
def test_a_thousand_races_of_sixteen(backend, pg_database, sink, tenant_token, tmp_path):
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path}/keystore.db"
        migrate.upgrade(url)
        servers = [Server(url, workers=4, threads=4, log_path=tmp_path / "s.log").start()]
    else:
        url = pg_database("_races")
        servers = [Server(url, workers=2, threads=4, log_path=tmp_path / f"{n}.log").start()
                   for n in range(2)]
    token = tenant_token(url)
    try:
        figures = run_races([s.url for s in servers], token, sink, backend)
        session = requests.Session()
        for race in range(0, RACES, 97):  # acknowledged completions are there (sampled)
            r = session.get(servers[0].url + "/v1/keys", params={
                "scope": "invoice", "key": f"race-{race}"},
                headers={"Authorization": f"Bearer {token}"}, timeout=10).json()
            assert r["record"]["state"] == "succeeded"
            assert r["record"]["result"]["resource_id"] == f"race-{race}"
            assert r["record"]["duplicate_count"] == CLAIMERS - 1
    finally:
        for s in servers:
            s.stop()
    logs = "".join(p.read_text() for p in tmp_path.glob("*.log"))
    assert "Traceback" not in logs
    assert figures["races_with_one_winner"] == RACES
    assert figures["duplicate_effects"] == 0 and figures["completes_failed"] == 0
    assert set(figures["statuses"]) <= {200, 201, 409, 503}
