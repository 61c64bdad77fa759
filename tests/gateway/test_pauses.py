"""Pauses from a destination's Retry-After (issue 25, item 6), on both backends: bounded by
the source's max_pause_seconds whatever the header says, ended by an operator's resume (API
and command line), and never keeping an event past its retry window."""
from __future__ import annotations

import json
import time

import pytest

from keystore_service.gateway import rules
from keystore_service.gateway.relay import Relay
from tests.support import T0, Http

from .support import Sink, cli, create_source, deliver

HOLDER = "pause-relay"
HOUR = 3600 * 1_000_000


def attempt_all(forwarding, ended: bool = False) -> list:
    """One relay round as the relay runs it (attempt: a paused source's ended event fails
    without a forward); with `ended`, the round that also sweeps for those events."""
    taken, _ = forwarding.take_some(HOLDER, 16, ended=ended)
    return [o.value if o else None for o in (
        forwarding.settle(job, HOLDER, forwarding.attempt(job)) for job in taken)]


def shown(gw, name="shop") -> dict:
    return gw.get(f"/v1/sources/{name}")[1]["source"]


def micros(rfc3339: str) -> int:
    from datetime import datetime
    return int(datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp() * 1e6)


# --- the bound ------------------------------------------------------------------------------

@pytest.mark.parametrize("header, paused_for", [
    ("999999999", HOUR),  # the issue's: a pause until 2058
    ("9223372036854775808", HOUR),  # 2^63
    ("9" * 5000, HOUR),  # more digits than int() takes (4,300): was an unsettled attempt
    ("Fri, 31 Dec 9999 23:59:59 GMT", HOUR),  # the latest HTTP date
    ("30", 30 * 1_000_000),  # within the bound: as asked
    ("-30", None),  # not delta-seconds: ignored
    ("\u00b2\u00b3", None),  # digits, but not ASCII ones: ignored
    ("Mon, 01 Jan 1990 00:00:00 GMT", 0),  # in the past: no pause to speak of
    ("soon, please", None),  # garbage
    ("Fri, 31 Dec 99999 23:59:59 GMT", None),  # beyond any date: unreadable
])
def test_a_retry_after_pauses_at_most_max_pause_seconds(gw, sink, forwarding, clock, header,
                                                        paused_for):
    sink.answer = lambda n, r: (429, {"Retry-After": header}) if n == 0 else 200
    source = create_source(gw, gw.token, sink.url)
    assert source["max_pause_seconds"] == 3600  # the default
    deliver(gw, source)
    assert attempt_all(forwarding) == ["retry"]  # settled, whatever the header was
    until = shown(gw)["paused_until"]
    if paused_for is None:
        assert until is None
    else:
        assert micros(until) == clock.now + paused_for
    clock.advance(3600)
    assert attempt_all(forwarding) == ["delivered"]  # an hour later at the latest


def test_the_bound_is_the_sources_own(gw, sink, forwarding, clock):
    sink.answer = lambda n, r: (503, {"Retry-After": "999999999"}) if n == 0 else 200
    source = create_source(gw, gw.token, sink.url, max_pause_seconds=60)
    deliver(gw, source)
    assert attempt_all(forwarding) == ["retry"]
    assert micros(shown(gw)["paused_until"]) == clock.now + 60 * 1_000_000
    clock.advance(59)
    assert attempt_all(forwarding) == []
    clock.advance(1)
    assert attempt_all(forwarding) == ["delivered"]


@pytest.mark.parametrize("value", [0, -1, 86401, 10 ** 20, "60", 1.5, None, True])
def test_max_pause_seconds_out_of_bounds_is_refused(gw, sink, value):
    create_source(gw, gw.token, sink.url)
    r = gw.client.patch("/v1/sources/shop", json={"max_pause_seconds": value},
                        headers=gw._auth(...))
    if value is None:  # PATCH: null is "no change"
        assert r.status_code == 200
    else:
        assert r.status_code == 400, value
        assert r.get_json()["error"]["code"] == "invalid_request"
    assert shown(gw)["max_pause_seconds"] == 3600
    status, body, _ = gw.post("/v1/sources", {
        "name": "other", "provider": "testing", "secrets": ["s"],
        "destination": {"url": sink.url}, "max_pause_seconds": value})
    assert status == 400, body  # on create, null is not a number either


def test_max_pause_seconds_is_changed_by_patch(gw, sink):
    create_source(gw, gw.token, sink.url, max_pause_seconds=86400)
    r = gw.client.patch("/v1/sources/shop", json={"max_pause_seconds": 1},
                        headers=gw._auth(...))
    assert r.status_code == 200 and r.get_json()["source"]["max_pause_seconds"] == 1


def test_the_rule_itself_at_its_edges():
    now = T0
    cap = 3600
    assert rules.retry_after(None, now, cap) is None and rules.retry_after("", now, cap) is None
    assert rules.retry_after(" 120 ", now, cap) == now + 120 * 1_000_000
    assert rules.retry_after("0", now, cap) == now
    assert rules.retry_after("\u0661\u0662\u0663", now, cap) is None  # Arabic-Indic digits
    assert rules.retry_after("１２", now, cap) is None  # fullwidth digits
    assert rules.retry_after("1e9", now, cap) is None and rules.retry_after("+5", now, cap) \
        is None
    assert rules.retry_after("9" * 100_000, now, cap) == now + cap * 1_000_000
    assert rules.retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now, cap) == now
    assert rules.retry_after("Sun, 06 Nov 1994 08:49:37", now, cap) is None  # no zone
    assert rules.retry_after("x" * 65536, now, cap) is None


# --- a pause that outlasts the retry window -------------------------------------------------

def test_an_event_whose_window_ends_while_paused_fails_with_a_review(gw, sink, forwarding,
                                                                     clock):
    """A 429 pauses the source for an hour; an event accepted meanwhile has a 60 s window:
    it fails when the window ends (record failed, delivery_failed review), never sent."""
    sink.answer = lambda n, r: (429, {"Retry-After": "3600"})
    source = create_source(gw, gw.token, sink.url, retry_window_seconds=60)
    deliver(gw, source)
    assert attempt_all(forwarding) == ["failed"]  # its next try would be after its window
    clock.advance(10)
    deliver(gw, source, json.dumps({"n": 2}).encode(), event_id="evt_2")
    assert attempt_all(forwarding, ended=True) == []  # paused, its window still open
    clock.advance(59.999)
    assert attempt_all(forwarding, ended=True) == []
    assert attempt_all(forwarding) == []  # a take that does not sweep leaves it
    clock.advance(0.001)  # its window's end (accepted 60 s ago)
    assert attempt_all(forwarding, ended=True) == ["failed"]
    assert len(sink.requests) == 1  # the paused destination was not sent it
    (d,) = gw.get("/v1/deliveries", event_id="evt_2")[1]["deliveries"]
    assert d["state"] == "failed" and "pause" in d["attempts"][-1]["error"]
    record = gw.get("/v1/keys", scope="hook:shop", key="evt_2")[1]["record"]
    assert record["state"] == "failed"
    reviews = gw.get("/v1/reviews", kind="delivery_failed")[1]["reviews"]
    assert {r["key"] for r in reviews} == {"evt_1", "evt_2"}


# --- resume ---------------------------------------------------------------------------------

def test_resume_ends_the_pause_and_its_events_are_due_at_once(gw, sink, forwarding, clock):
    sink.answer = lambda n, r: (429, {"Retry-After": "3000"}) if n == 0 else 200
    source = create_source(gw, gw.token, sink.url)
    deliver(gw, source)
    deliver(gw, source, json.dumps({"n": 2}).encode(), event_id="evt_2")
    taken, _ = forwarding.take_some(HOLDER, 1)
    assert [forwarding.settle(j, HOLDER, forwarding.attempt(j)).value for j in taken] == \
        ["retry"]
    clock.advance(5)
    assert attempt_all(forwarding) == []
    status, body, _ = gw.post("/v1/sources/shop/resume")
    assert status == 200 and body["source"]["paused_until"] is None
    assert body["source"]["name"] == "shop"
    assert sorted(attempt_all(forwarding)) == ["delivered", "delivered"]
    status, body, _ = gw.post("/v1/sources/shop/resume")  # not paused: the same answer
    assert status == 200 and body["source"]["paused_until"] is None


def test_resume_is_an_operators_and_only_of_its_own_tenant(gw, op, sink):
    create_source(gw, gw.token, sink.url)
    status, body, _ = gw.post("/v1/sources/shop/resume", token=op["client"])
    assert status == 403 and body["error"]["code"] == "forbidden"
    other = Http(gw.client, op["globex"])
    for http, name in ((other, "shop"), (gw, "nope"), (gw, "Shop"), (gw, "%2e%2e"),
                       (gw, "shop%0d%0aX-Injected:%201"), (gw, "shop%00"), (gw, "%E6%9D%B1")):
        status, body, _ = http.post(f"/v1/sources/{name}/resume")
        assert status == 404 and body["error"]["code"] == "not_found", name
        assert set(body["error"]) == {"code", "message", "details"}
    status, body, headers = gw.post("/v1/sources/" + "a" * 5000 + "/resume")
    assert status == 404 and body["error"]["code"] == "not_found"
    assert "X-Injected" not in headers
    r = gw.client.get("/v1/sources/shop/resume", headers=gw._auth(...))
    assert r.status_code == 405 and r.get_json()["error"]["code"] == "method_not_allowed"
    # a body may name a destination (issue 29), so it is read: what is not one is refused
    for raw in (b'{"until": ', b'{"until": null}', b'{"destination": "a\r\nX-Injected: 1"}',
                b'{"destination": 1}'):
        status, body, headers = gw.post("/v1/sources/shop/resume", raw=raw, headers={
            "Content-Type": "application/json"})
        assert status == 400 and body["error"]["code"] == "invalid_request", raw
        assert "X-Injected" not in headers
    status, body, _ = gw.post("/v1/sources/shop/resume", raw=b"{}", headers={
        "Content-Type": "application/json"})
    assert status == 200 and body["source"]["paused_until"] is None


def test_resume_on_the_command_line(database_url, gw, sink, forwarding, clock):
    sink.answer = lambda n, r: (429, {"Retry-After": "600"}) if n == 0 else 200
    deliver(gw, create_source(gw, gw.token, sink.url))
    assert attempt_all(forwarding) == ["retry"]
    assert shown(gw)["paused_until"] is not None
    done = cli(database_url, "source", "resume", "--tenant", "acme", "shop")
    assert done.returncode == 0, done.stderr
    assert "resumed" in done.stderr and shown(gw)["paused_until"] is None
    missing = cli(database_url, "source", "resume", "--tenant", "acme", "nope")
    assert missing.returncode == 1 and "no source named 'nope'" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_a_real_relay_forwards_at_once_after_a_resume(database_url, live_app):
    """Real clock, real relay: a 429 with Retry-After 999999999 holds the source (for an
    hour now, not 30 years); a resume lets its two events out within a moment."""
    app, http = live_app
    sink = Sink(lambda n, r: (429, {"Retry-After": "999999999"}) if n == 0 else 200)
    try:
        source = create_source(http, http.token, sink.url)
        relay = Relay(app.extensions["keystore"].gateway.forwarding, 4, "resume-relay")
        app.extensions["keystore"].gateway.relay = relay.start()
        deliver(http, source)
        deadline = time.monotonic() + 10
        while shown(http)["paused_until"] is None and time.monotonic() < deadline:
            time.sleep(0.02)
        until = micros(shown(http)["paused_until"])
        assert until <= time.time() * 1e6 + HOUR + 5e6
        deliver(http, source, b'{"n": 2}', event_id="evt_2")
        time.sleep(1.5)  # a sweep or more: nothing goes out while paused
        assert len(sink.requests) == 1
        started = time.monotonic()
        assert http.post("/v1/sources/shop/resume")[0] == 200
        while len(sink.requests) < 3 and time.monotonic() - started < 5:
            time.sleep(0.01)
        assert len(sink.requests) == 3 and time.monotonic() - started < 1.5
    finally:
        sink.close()


@pytest.fixture
def live_app(database_url):
    from keystore_service.app import create_app
    from keystore_service.settings import Settings

    from .support import KEY
    app = create_app(Settings(database_url=database_url, secret_key=KEY,
                              token_cache_seconds=0))
    ks = app.extensions["keystore"]
    now = int(time.time() * 1_000_000)
    ks.accounts.create_tenant("acme", now)
    yield app, Http(app.test_client(), ks.accounts.create_token("acme", "operator", None, now))
    if ks.gateway.relay is not None:
        ks.gateway.relay.stop(wait=5)
    ks.database.engine.dispose()


@pytest.mark.parametrize("name", ["shop%00", "%00", "sh%00op"])
def test_a_nul_in_a_sources_name_is_not_found_on_every_endpoint(gw, sink, name):
    """PostgreSQL refuses a NUL in a query: the name was looked up anyway and answered 500
    on GET, PATCH, DELETE and resume of /v1/sources/<name>."""
    create_source(gw, gw.token, sink.url)
    auth = gw._auth(...)
    for r in (gw.client.get(f"/v1/sources/{name}", headers=auth),
              gw.client.patch(f"/v1/sources/{name}", json={"max_in_flight": 1}, headers=auth),
              gw.client.delete(f"/v1/sources/{name}", headers=auth),
              gw.client.post(f"/v1/sources/{name}/resume", headers=auth)):
        assert r.status_code == 404 and r.get_json()["error"]["code"] == "not_found"
    assert shown(gw)["state"] == "active" and shown(gw)["max_in_flight"] == 4


def test_the_relay_sweeps_for_ended_events_about_once_a_second():
    """The relay's takes ask for the paused sources' ended events on its first take and
    then at most once per SWEEP_SECONDS, not on every take (that scan is not free)."""
    import threading as _threading

    class Forwarding:
        calls: list = []
        clock = staticmethod(lambda: 0)

        def take_some(self, holder, limit, ended=False):
            self.calls.append((time.monotonic(), ended))
            return [], True

        def take_paced(self, holder, limit, ended=False):  # what the relay calls
            return (*self.take_some(holder, limit, ended), None)

    relay = Relay(Forwarding(), 2, "sweep-relay")  # type: ignore[arg-type]
    relay.start()
    stop = time.monotonic() + 2.5
    waker = _threading.Thread(target=lambda: [
        (relay.wake(), time.sleep(0.01)) for _ in range(1000) if time.monotonic() < stop])
    waker.start()
    waker.join(10)
    relay.stop(wait=5)
    calls = Forwarding.calls
    assert len(calls) > 20 and calls[0][1] is True
    sweeps = [at for at, ended in calls if ended]
    assert 2 <= len(sweeps) <= 4
    assert all(b - a >= 0.99 for a, b in zip(sweeps, sweeps[1:]))
