"""Long polls never hold every thread of a worker (issue 13, item 4): a real gunicorn with
2 workers x 4 threads, on both backends. Ten waits from one token and sixteen from sixteen
other tokens of the tenant on one in-progress record; /healthz stays fast meanwhile."""
from __future__ import annotations

import threading
import time

import pytest
import requests

from tests.support import Api, Server, new_token

WAIT = 6


@pytest.fixture(scope="module")
def small(e2e_url, tmp_path_factory):
    s = Server(e2e_url, workers=2, threads=4,
               log_path=tmp_path_factory.mktemp("log") / "server.log").start()
    yield s
    s.stop()


def test_waiting_takes_a_bounded_share_of_the_threads(small, e2e_url):
    holder = new_token(e2e_url, "lp")  # every token below is another token of this tenant
    ref = {"scope": "invoice", "key": "slow-1"}
    status, _, _ = Api(small.url, holder).post("/v1/claim", {**ref, "lease_seconds": 120})
    assert status == 201
    greedy = new_token(e2e_url, "lp")
    crowd = [new_token(e2e_url, "lp") for _ in range(16)]
    tokens = [greedy] * 10 + crowd
    answers: list = [None] * len(tokens)

    def wait(i: int) -> None:
        started = time.monotonic()
        r = requests.get(small.url + "/v1/keys", params={**ref, "wait": WAIT}, timeout=30,
                         headers={"Authorization": f"Bearer {tokens[i]}"})
        answers[i] = (r.status_code, r.json()["record"]["state"],
                      r.headers.get("Retry-After"), time.monotonic() - started)
    threads = [threading.Thread(target=wait, args=(i,)) for i in range(len(tokens))]
    for t in threads:
        t.start()
    time.sleep(0.5)  # every wait has arrived
    health = []
    for _ in range(8):
        started = time.monotonic()
        assert requests.get(small.url + "/healthz", timeout=10).status_code == 200
        health.append(time.monotonic() - started)
        time.sleep(0.3)
    for t in threads:
        t.join(30)
    assert max(health) < 0.5, health  # v0.1: 5.5 s, every thread was waiting

    assert all(a[:2] == (200, "in_progress") for a in answers), answers
    waited = [i for i, a in enumerate(answers) if a[3] >= WAIT - 0.5]
    at_once = [a for i, a in enumerate(answers) if i not in waited]
    # 2 workers x 2 seats (half of 4 threads); one seat per token in each worker
    assert 1 <= len(waited) <= 4, answers
    assert len([i for i in waited if i < 10]) <= 2, answers
    assert all(a[2] == "1" and a[3] < 2 for a in at_once), at_once


def test_claims_that_wait_share_the_same_seats(small, e2e_url):
    """Claim-and-wait (v1.1) is bounded like a long poll: past the seats, a claim answers
    409 in_progress at once, and /healthz stays fast."""
    holder = new_token(e2e_url, "lp2")
    ref = {"scope": "invoice", "key": "slow-2"}
    assert Api(small.url, holder).post("/v1/claim", {**ref, "lease_seconds": 120})[0] == 201
    greedy = new_token(e2e_url, "lp2")
    answers: list = [None] * 12

    def claim(i: int) -> None:
        started = time.monotonic()
        status, body, headers = Api(small.url, greedy).post("/v1/claim",
                                                             {**ref, "wait_seconds": WAIT})
        answers[i] = (status, body["outcome"], time.monotonic() - started)
    threads = [threading.Thread(target=claim, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    started = time.monotonic()
    assert requests.get(small.url + "/healthz", timeout=10).status_code == 200
    assert time.monotonic() - started < 0.5
    for t in threads:
        t.join(30)
    assert all(a[:2] == (409, "in_progress") for a in answers), answers
    waited = [a for a in answers if a[2] >= WAIT - 0.5]
    assert 1 <= len(waited) <= 2, answers  # one seat per token in each of 2 workers
    status, body, _ = Api(small.url, holder).get("/v1/keys", **ref)
    assert body["record"]["duplicate_count"] == 12  # each claim counted once
