"""Contract v1.1 claims on both backends: proposed lease tokens (a claim whose answer was
lost resumes instead of waiting for reconciliation) and claim-and-wait (one call instead of
the claim / wait / claim-again loop, and one repeat counted once)."""
from __future__ import annotations

import secrets
import threading
import time

import pytest

from tests.integration.support import snapshot

REF = {"scope": "invoice", "key": "evt-1"}


def token() -> str:
    return "lt_" + secrets.token_urlsafe(24)


def claim(http, **extra):
    return http.post("/v1/claim", {**REF, "payload": {"n": 1}, **extra})


def test_a_repeated_claim_with_its_own_token_resumes_the_same_attempt(http):
    mine = token()
    status, first, _ = claim(http, lease_token=mine)
    assert status == 201 and first["lease_token"] == mine and "resumed" not in first
    status, again, headers = claim(http, lease_token=mine)  # the first answer was lost
    assert status == 201 and again["outcome"] == "acquired" and again["resumed"] is True
    assert headers["Idempotent-Replayed"] == "true"
    assert (again["attempt"], again["lease_token"]) == (1, mine)
    assert again["record"]["lease_expires_at"] == first["record"]["lease_expires_at"]
    assert again["record"]["duplicate_count"] == 0  # not a repeat: the same claim
    status, other, _ = claim(http, lease_token=token())
    assert status == 409 and other["outcome"] == "in_progress"
    status, done, _ = http.post("/v1/complete", {**REF, "lease_token": mine,
                                                 "state": "succeeded"})
    assert status == 200
    status, after, _ = claim(http, lease_token=mine)
    assert status == 200 and after["outcome"] == "replay" and "resumed" not in after


def test_a_stale_lease_resumes_for_its_own_token_only(http, clock):
    mine = token()
    claim(http, lease_token=mine, lease_seconds=5)
    clock.advance(6)
    status, again, _ = claim(http, lease_token=mine)
    assert status == 201 and again["resumed"] is True and again["attempt"] == 1
    status, other, _ = claim(http, lease_token=token())
    assert status == 409 and other["outcome"] == "needs_reconciliation"


def test_one_token_proposed_for_two_keys_works_for_each(http):
    shared = token()
    a = http.post("/v1/claim", {"scope": "s", "key": "a", "lease_token": shared})
    b = http.post("/v1/claim", {"scope": "s", "key": "b", "lease_token": shared})
    assert (a[0], b[0]) == (201, 201)
    assert http.post("/v1/complete", {"scope": "s", "key": "a", "lease_token": shared,
                                      "state": "succeeded"})[0] == 200
    assert http.get("/v1/keys", scope="s", key="b")[1]["record"]["state"] == "in_progress"


@pytest.mark.parametrize("bad", ["lt_short", "lt_" + "a" * 65, "xx_" + "a" * 24,
                                 "lt_" + "a" * 23 + "!", "lt_" + "0" * 24, "lt_" + "ab" * 12,
                                 "lt_" + "é" * 24, 12345, ""])
def test_malformed_or_weak_proposed_tokens_are_400_and_change_nothing(app, http, bad):
    before = snapshot(app)
    status, body, _ = claim(http, lease_token=bad)
    assert status == 400 and body["error"]["code"] == "invalid_request"
    status, body, _ = http.post("/v1/claim/batch", {"scope": "s", "items": [
        {"key": "a"}, {"key": "b", "lease_token": bad}]})
    assert status == 400
    assert snapshot(app) == before


def test_a_batch_item_resumes_with_its_token_and_a_repeat_in_it_does_not(http):
    mine = token()
    first = http.post("/v1/claim/batch", {"scope": "s", "items": [
        {"key": "a", "lease_token": mine}]})[1]["results"]
    assert first[0]["lease_token"] == mine
    again = http.post("/v1/claim/batch", {"scope": "s", "items": [
        {"key": "a", "lease_token": mine}, {"key": "a", "lease_token": mine}]})[1]["results"]
    assert again[0]["outcome"] == "acquired" and again[0]["resumed"] is True
    assert again[1]["outcome"] == "in_progress"  # a key twice: the first has it


def finish_later(app, token_, seconds: float, action: str = "complete"):
    """The holder ends its attempt from another thread after `seconds`."""
    def run():
        time.sleep(seconds)
        body = {**REF, "lease_token": token_}
        if action == "complete":
            body |= {"state": "succeeded", "result": {"resource_id": "INV-7"}}
        app.test_client().post(f"/v1/{action}", json=body,
                               headers={"Authorization": f"Bearer {app.config['holder']}"})
    t = threading.Thread(target=run)
    t.start()
    return t


@pytest.fixture
def holder(app, tokens):
    app.config["holder"] = tokens["acme"]


@pytest.mark.parametrize("action,status,outcome", [("complete", 200, "replay"),
                                                   ("release", 201, "acquired")])
def test_a_claim_that_waits_answers_by_what_the_holder_did(app, http, holder, action, status,
                                                           outcome):
    held = claim(http)[1]["lease_token"]
    t = finish_later(app, held, 0.4, action)
    started = time.monotonic()
    got, body, _ = claim(http, wait_seconds=10)
    t.join()
    assert (got, body["outcome"]) == (status, outcome)
    assert 0.3 < time.monotonic() - started < 5
    if outcome == "replay":
        assert body["record"]["result"]["resource_id"] == "INV-7"
        assert body["record"]["duplicate_count"] == 1  # one repeat, counted once
    else:
        assert body["attempt"] == 2


def test_a_claim_that_waits_too_long_is_409_counted_once(http):
    claim(http)
    started = time.monotonic()
    status, body, headers = claim(http, wait_seconds=1)
    assert status == 409 and body["outcome"] == "in_progress" and "Retry-After" in headers
    assert time.monotonic() - started >= 0.9
    assert body["record"]["duplicate_count"] == 1


def test_a_new_key_with_a_wait_is_acquired_at_once(http):
    started = time.monotonic()
    status, body, _ = claim(http, wait_seconds=30)
    assert status == 201 and time.monotonic() - started < 2


@pytest.mark.postgres
def test_the_wait_holds_no_transaction(pg_url, clock):
    """While a claim waits, PostgreSQL sees no transaction of the service open."""
    import psycopg

    from keystore_service.app import create_app
    from keystore_service.settings import Settings
    from tests.conftest import truncate_pg
    truncate_pg(pg_url)
    app = create_app(Settings(database_url=pg_url), clock)
    ks = app.extensions["keystore"]
    ks.accounts.create_tenant("acme", 0)
    t = ks.accounts.create_token("acme", "client", None, 0)
    h = {"Authorization": f"Bearer {t}"}
    client = app.test_client()
    assert client.post("/v1/claim", json={**REF}, headers=h).status_code == 201
    out = {}
    waiter = threading.Thread(target=lambda: out.setdefault("r", app.test_client().post(
        "/v1/claim", json={**REF, "wait_seconds": 2}, headers=h)))
    waiter.start()
    time.sleep(0.8)
    name = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
        open_tx = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND xact_start IS NOT "
            "NULL AND pid <> pg_backend_pid()", (name,)).fetchone()[0]
    waiter.join()
    assert out["r"].status_code == 409 and open_tx == 0
    ks.database.engine.dispose()


def test_a_duplicate_that_lost_the_insert_race_still_waits_and_counts_once(ks, tenant_id,
                                                                          monkeypatch):
    """A claim that arrived with the first one (its look before claiming found no record,
    then its insert lost the race) waits like later ones (issue 15: 4 of 40 such duplicates
    were told in_progress at once although they had asked to wait)."""
    from keystore_service.service.claims import Claim
    first = ks.service.claim(tenant_id, Claim("invoice", "evt-r", None, 3600, 60, "reconcile"))
    real = ks.service._wait_while
    looks = []

    def arrived_before_the_insert(*args, **kwargs):
        looks.append(1)
        if len(looks) == 1:
            return None, ks.service.clock()  # "no record yet": it claims at once
        return real(*args, **kwargs)
    monkeypatch.setattr(ks.service, "_wait_while", arrived_before_the_insert)
    finisher = threading.Timer(0.3, lambda: ks.service.complete(
        tenant_id, "invoice", "evt-r", first.lease_token, "succeeded", "{}"))
    finisher.start()
    got = ks.service.claim(tenant_id, Claim("invoice", "evt-r", None, 3600, 60, "reconcile"),
                           wait_seconds=5)
    finisher.join()
    assert got.outcome.value == "replay" and len(looks) == 2
    assert ks.service.lookup(tenant_id, "invoice", "evt-r").duplicate_count == 1
