"""Over real HTTP, against a real gunicorn with 4 workers, on both backends."""
from __future__ import annotations

import threading
from collections import Counter

import requests

from tests.support import Api

CLAIMERS = 32
KEYS = 50


def concurrently(n, fn):
    barrier, out = threading.Barrier(n), [None] * n

    def run(i):
        barrier.wait()
        out[i] = fn(i)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def test_32_concurrent_claims_of_one_key_acquire_once_for_50_keys(server, token):
    sessions = [requests.Session() for _ in range(CLAIMERS)]
    tally = Counter()
    for k in range(KEYS):
        body = {"scope": "invoice", "key": f"evt-{k}", "payload": {"n": k}}
        results = concurrently(CLAIMERS, lambda i, body=body: Api(
            server.url, token, sessions[i]).post("/v1/claim", body))
        outcomes = Counter((status, b["outcome"]) for status, b, _ in results)
        assert outcomes[(201, "acquired")] == 1, outcomes
        assert outcomes[(409, "in_progress")] == CLAIMERS - 1, outcomes
        tally.update(outcomes)
    assert tally[(201, "acquired")] == KEYS


def test_a_completed_key_replayed_20_times_concurrently(server, token):
    api = Api(server.url, token)
    body = {"scope": "invoice", "key": "evt-done", "payload": {"amount": 10}}
    status, claimed, _ = api.post("/v1/claim", body)
    assert status == 201
    status, _, _ = api.post("/v1/complete", {"scope": "invoice", "key": "evt-done",
                                             "lease_token": claimed["lease_token"],
                                             "state": "succeeded",
                                             "result": {"resource_id": "INV-7"}})
    assert status == 200
    results = concurrently(20, lambda i: Api(server.url, token).post("/v1/claim", body))
    assert {(s, b["outcome"], h["Idempotent-Replayed"]) for s, b, h in results} == \
        {(200, "replay", "true")}
    assert {b["record"]["result"]["resource_id"] for _, b, _ in results} == {"INV-7"}
    assert sorted(b["record"]["duplicate_count"] for _, b, _ in results) == list(range(1, 21))


def test_no_request_saw_a_server_error(server, token):
    api = Api(server.url, token)
    results = concurrently(16, lambda i: api.session.post(
        server.url + "/v1/claim", json={"scope": "s", "key": f"k{i % 4}"},
        headers=api.headers, timeout=30).status_code)
    assert set(results) <= {201, 409}


def test_metrics_add_up_across_the_workers(server, token):
    from prometheus_client.parser import text_string_to_metric_families

    def claims_of(scope):
        text = requests.get(server.url + "/metrics", timeout=10).text
        return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                   if s.name == "keystore_claims_total" and s.labels.get("scope") == scope)
    before = claims_of("metered")
    sessions = [requests.Session() for _ in range(8)]  # spread over the 4 workers
    results = concurrently(8, lambda i: [Api(server.url, token, sessions[i]).post(
        "/v1/claim", {"scope": "metered", "key": f"m-{i}-{n}"})[0] for n in range(25)])
    assert {s for r in results for s in r} == {201}
    assert claims_of("metered") - before == 200
