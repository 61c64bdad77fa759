"""Only correctly signed deliveries spend a source's rate (issue 25, item 5), on both backends:
12 threads posting bad signatures made 40 of 79 correctly signed GitHub deliveries answer 429,
and GitHub does not resend those."""
from __future__ import annotations

import json
import threading
import time

import pytest

from keystore_service.app import create_app
from keystore_service.settings import Settings
from tests.support import T0, Http

from .support import KEY, create_source, signed

RATE = 40  # signed deliveries a second (and a burst of as many)
BAD_RATE = 5  # deliveries with a bad signature answered 401 a second, then 429
SIGNED = 30  # correctly signed deliveries, sent at well under RATE (10 a second)


@pytest.fixture
def limited(database_url, clock):
    app = create_app(Settings(database_url=database_url, secret_key=KEY, token_cache_seconds=0,
                              hook_rate_limit_per_second=RATE,
                              hook_bad_signature_per_second=BAD_RATE), clock)
    accounts = app.extensions["keystore"].accounts
    accounts.create_tenant("acme", T0)
    http = Http(app.test_client(), accounts.create_token("acme", "operator", None, T0))
    yield app, http
    app.extensions["keystore"].database.engine.dispose()


def test_a_flood_of_bad_signatures_never_makes_a_signed_delivery_429(limited):
    app, http = limited
    source = create_source(http, http.token, "http://127.0.0.1:9/")
    path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
    done, bad = threading.Event(), []
    lock = threading.Lock()

    def flood(n: int) -> None:
        client = app.test_client()
        deadline = time.monotonic() + 60  # bounded, whatever happens to the signed ones
        while not done.is_set() and time.monotonic() < deadline:
            body = json.dumps({"junk": n}).encode()
            headers = signed(body, f"junk-{n}", secret="guessed") if n % 2 else {
                "X-Test-Id": f"junk-{n}"}  # a wrong signature, or none
            r = client.post(path, data=body, headers=headers)
            with lock:
                bad.append((r.status_code, (r.get_json() or {}).get("error", {}).get("code")))
    threads = [threading.Thread(target=flood, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    answers = []
    try:
        client = app.test_client()
        time.sleep(0.5)  # the flood has spent any budget it could by now
        for n in range(SIGNED):
            body = json.dumps({"id": n}).encode()
            answers.append(client.post(path, data=body, headers=signed(body, f"evt-{n}"))
                           .status_code)
            time.sleep(0.1)
    finally:
        done.set()
        for t in threads:
            t.join(60)
    assert answers == [202] * SIGNED
    assert len(bad) > 2 * SIGNED, len(bad)  # it was a flood
    kinds = set(bad)
    assert kinds <= {(401, "invalid_signature"), (429, "rate_limited")}, kinds
    assert (401, "invalid_signature") in kinds and (429, "rate_limited") in kinds
    r = app.test_client().post(path, data=b"{}", headers={"X-Test-Id": "x"})
    if r.status_code == 429:  # the bad-signature budget is spent: it says why, and when
        assert r.get_json()["error"]["details"]["reason"] == "invalid_signatures"
        assert int(r.headers["Retry-After"]) >= 1


def test_signed_deliveries_over_the_rate_still_get_429(limited):
    """The buckets' clock stands still: exactly RATE signed deliveries pass, then 429."""
    app, http = limited
    source = create_source(http, http.token, "http://127.0.0.1:9/")
    path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
    app.extensions["keystore"].gateway.ingest.admission.signed_buckets.monotonic = lambda: 0.0
    client, statuses = app.test_client(), []
    for n in range(RATE + 1):
        body = json.dumps({"id": n}).encode()
        r = client.post(path, data=body, headers=signed(body, f"evt-{n}"))
        statuses.append(r.status_code)
    assert statuses == [202] * RATE + [429]
    assert r.get_json()["error"]["details"] == {"reason": "rate", "retry_after_seconds": 1}
    assert r.headers["Retry-After"] == "1"
