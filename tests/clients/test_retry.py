"""Retries: the backoff arithmetic on a test clock, then the client's decisions through a
fault-injecting proxy in front of the real service (only network conditions are faked; every
request that goes through is decided by the service)."""
from __future__ import annotations

import threading

import pytest
from keystore_client import (
    ConnectError,
    InProgress,
    KeyStore,
    OutcomeUnknown,
    RateLimited,
    RetryPolicy,
    UnexpectedResponse,
)
from keystore_client._retry import parse_retry_after

from tests.support import free_port

from .faults import FaultProxy


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def policy(t: FakeTime, rnd: float = 1.0, **kw) -> RetryPolicy:
    return RetryPolicy(sleep=t.sleep, clock=t.clock, random=lambda: rnd, **kw)


# --- the arithmetic ---------------------------------------------------------------------

def test_full_jitter_ceilings_double_up_to_the_cap_and_tries_are_bounded():
    t = FakeTime()
    r = policy(t, tries=6, base_delay=0.5, max_delay=3, budget=100).start()
    while r.pause():
        pass
    assert t.sleeps == [0.5, 1.0, 2.0, 3.0, 3.0] and r.tries == 6


def test_jitter_draws_uniformly_below_the_ceiling():
    t = FakeTime()
    r = policy(t, rnd=0.25, base_delay=1, max_delay=8).start()
    r.pause(), r.pause(), r.pause()
    assert t.sleeps == [0.25, 0.5, 1.0]


def test_the_budget_stops_before_a_pause_would_overrun_it():
    t = FakeTime()
    r = policy(t, tries=100, base_delay=1, max_delay=4, budget=10).start()
    while r.pause():
        pass
    assert t.sleeps == [1, 2, 4] and sum(t.sleeps) <= 10  # the next 4 s would end at 11


def test_retry_after_is_a_floor_and_a_too_long_one_gives_up_at_once():
    t = FakeTime()
    r = policy(t, rnd=0.0, budget=30).start()
    assert r.pause(retry_after=2) and t.sleeps == [2]
    assert not r.pause(retry_after=3600) and t.sleeps == [2]


def test_parse_retry_after_reads_only_what_the_rfc_allows():
    # str.isdigit() is true for Arabic-Indic and superscript digits, and float() reads
    # the former: a header the RFC does not allow must not set a pause
    for odd in ("\u0663", "\u00b3", "1\u0660", "-5", "1.5", "1e3", "0x10", "5 s"):
        assert parse_retry_after(odd) is None, odd
    assert parse_retry_after("9" * 400) == 1e9  # capped, never inf
    assert parse_retry_after("Fri, 15 Jan 99999 08:00:30 GMT") is None


def test_parse_retry_after_seconds_and_http_dates():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    now = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    assert parse_retry_after("Fri, 15 Jan 2027 08:00:30 GMT", now=lambda: now) == 30.0
    assert parse_retry_after("Fri, 15 Jan 2027 07:00:00 GMT", now=lambda: now) == 0.0


# --- the decisions, through the proxy ---------------------------------------------------

@pytest.fixture
def proxy(service):
    p = FaultProxy(service.url).start()
    yield p
    p.stop()


def fast(budget: float = 10) -> RetryPolicy:
    return RetryPolicy(tries=5, base_delay=0.05, max_delay=0.2, budget=budget)


def test_503_and_429_are_retried_honouring_retry_after(service, proxy, scope):
    slept: list[float] = []
    ks = KeyStore(proxy.url, service.token, retry=RetryPolicy(
        tries=5, base_delay=0.05, max_delay=0.2, budget=10, sleep=slept.append))
    unavailable = b'{"error":{"code":"unavailable","message":"db down","details":{}}}'
    proxy.answer("/v1/claim", 503, {"Retry-After": "1", "Content-Type": "application/json"},
                 unavailable)
    proxy.answer("/v1/claim", 429, {"Retry-After": "0"}, b'{"error":{"code":"rate_limited",'
                 b'"message":"slow down","details":{}}}')
    claimed = ks.claim(scope, "k")
    assert claimed.acquired and proxy.seen["/v1/claim"] == 3
    assert slept[0] >= 1.0  # the service asked for a second: not sooner


def test_a_retry_after_beyond_the_budget_raises_at_once(service, proxy, scope):
    ks = KeyStore(proxy.url, service.token, retry=fast(budget=5))
    proxy.answer("/v1/claim", 429, {"Retry-After": "3600"},
                 b'{"error":{"code":"rate_limited","message":"slow down","details":{}}}')
    with pytest.raises(RateLimited) as info:
        ks.claim(scope, "k")
    assert info.value.retry_after == 3600 and proxy.seen["/v1/claim"] == 1


def test_a_claim_whose_answer_was_lost_is_repeated_and_resumes(service, proxy, ks, scope):
    """Contract v1.1: the claim proposed its own lease token, so its repeat after a lost
    answer is the same attempt again (before v1.1 the client could not repeat it, and the
    key waited out its lease and went to reconciliation)."""
    client = KeyStore(proxy.url, service.token, retry=fast())
    proxy.drop_answer("/v1/claim")
    claimed = client.claim(scope, "k")
    assert proxy.seen["/v1/claim"] == 2  # applied, its answer dropped, sent again
    assert claimed.acquired and claimed.resumed and claimed.attempt == 1
    with pytest.raises(InProgress):  # anybody else still meets the live lease
        ks.claim(scope, "k")
    client.complete(scope, "k", claimed.lease_token, result={"resource_id": "INV-1"})
    record = ks.lookup(scope, "k")
    assert (record.state, record.attempt, record.duplicate_count) == ("succeeded", 1, 1)


def test_a_claim_whose_answers_are_all_lost_raises_and_the_callers_token_resumes_it(
        service, proxy, ks, scope):
    from keystore_client import new_lease_token
    client = KeyStore(proxy.url, service.token, retry=RetryPolicy(tries=2, base_delay=0.01))
    mine = new_lease_token()
    proxy.drop_answer("/v1/claim", times=2)
    with pytest.raises(OutcomeUnknown):
        client.claim(scope, "k", lease_token=mine)
    later = ks.claim(scope, "k", lease_token=mine)  # the caller repeats it, later
    assert later.resumed and later.attempt == 1 and later.lease_token == mine


def test_a_complete_whose_answer_was_lost_is_repeated_with_the_same_token(
        service, proxy, ks, scope):
    client = KeyStore(proxy.url, service.token, retry=fast())
    c = client.claim(scope, "k")
    proxy.drop_answer("/v1/complete")
    record = client.complete(scope, "k", c.lease_token, result={"resource_id": "INV-1"})
    assert record.state == "succeeded" and proxy.seen["/v1/complete"] == 2
    assert ks.lookup(scope, "k").result.resource_id == "INV-1"


def test_connection_refused_is_retried_until_the_service_is_there(service, scope):
    port = free_port()
    late = FaultProxy(service.url, port=port)
    timer = threading.Timer(0.4, late.start)
    timer.start()
    try:
        ks = KeyStore(f"http://127.0.0.1:{port}", service.token,
                      retry=RetryPolicy(tries=30, base_delay=0.05, max_delay=0.1, budget=10))
        assert ks.claim(scope, "k").acquired
    finally:
        timer.join()
        late.stop()


def test_connection_refused_past_the_budget_raises_connect_error(service, scope):
    ks = KeyStore(f"http://127.0.0.1:{free_port()}", service.token,
                  retry=RetryPolicy(tries=3, base_delay=0.01, max_delay=0.02, budget=2))
    with pytest.raises(ConnectError):
        ks.claim(scope, "k")


def test_an_answer_outside_the_contract_is_unexpected_and_not_retried(service, proxy, scope):
    ks = KeyStore(proxy.url, service.token, retry=fast())
    proxy.answer("/v1/claim", 502, {"Content-Type": "text/html"}, b"<h1>Bad gateway</h1>")
    with pytest.raises(UnexpectedResponse) as info:
        ks.claim(scope, "k")
    assert info.value.status == 502 and proxy.seen["/v1/claim"] == 1


def test_an_answer_that_breaks_off_mid_body_is_an_unknown_outcome():
    """Found by the fault suite: a gunicorn worker SIGKILLed while writing its answer leaves
    the headers sent and the body short; that must be OutcomeUnknown, not a raw requests
    error escaping the client."""
    import socket
    import threading

    from keystore_client import KeyStore, OutcomeUnknown, RetryPolicy

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def half_answer():
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 201 CREATED\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 500\r\n\r\n{\"outcome\": \"acq")
        conn.close()
    threading.Thread(target=half_answer, daemon=True).start()
    ks = KeyStore(f"http://127.0.0.1:{listener.getsockname()[1]}", "ks_token",
                  retry=RetryPolicy.never())
    with pytest.raises(OutcomeUnknown):
        ks.claim("scope", "key")
    listener.close()
