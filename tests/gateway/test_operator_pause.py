"""An operator's pause and resume, and retry now (issue 27), on both backends: a paused
source accepts and forwards nothing, its paused time never counts toward an event's retry
window (a destination's Retry-After pause still fails an event whose window ends in it),
GET /v1/sources shows the pause and the queue, every bad input is a 400 that changes
nothing, and retry now makes a backed-off event due at once (409 with its state when it is
not queued)."""
from __future__ import annotations

import pytest

from .support import BODY, at, attempt_all, create_source, deliver

WINDOW = 60  # the shortest retry window a source takes
TTL = WINDOW + 86_400  # at least the window and a day


def shown(gw, name="shop") -> dict:
    status, body, _ = gw.get(f"/v1/sources/{name}")
    assert status == 200, body
    return body["source"]


def state_of(gw, event_id="evt_1") -> dict:
    return gw.get("/v1/deliveries", event_id=event_id)[1]["deliveries"][0]


def pause(gw, body=None, name="shop"):
    return gw.post(f"/v1/sources/{name}/pause", body) if body is not None else \
        gw.post(f"/v1/sources/{name}/pause", raw=b"")


def test_a_paused_source_accepts_and_forwards_nothing_until_resumed(gw, sink, forwarding):
    source = create_source(gw, gw.token, sink.url)
    status, body, _ = pause(gw, {"reason": "deploying the workflow"})
    assert status == 200, body
    assert body["source"]["paused"] == {"by": "operator", "until": None,
                                        "reason": "deploying the workflow"}
    assert deliver(gw, source)[0] == 202
    assert attempt_all(forwarding) == [] and sink.requests == []
    assert shown(gw)["queue"]["queued"] == 1
    status, body, _ = gw.post("/v1/sources/shop/resume", {})
    assert status == 200 and body["source"]["paused"] is None
    assert attempt_all(forwarding) == ["delivered"]


def test_no_body_is_a_pause_until_resumed(gw, sink):
    create_source(gw, gw.token, sink.url)
    status, body, _ = pause(gw)
    assert status == 200, body
    assert body["source"]["paused"] == {"by": "operator", "until": None, "reason": None}


def test_the_paused_time_does_not_count_toward_the_retry_window(gw, sink, forwarding, clock):
    sink.answer = lambda n, r: 500 if n < 2 else 200
    source = create_source(gw, gw.token, sink.url, retry_window_seconds=WINDOW,
                           ttl_seconds=TTL)
    deliver(gw, source)
    clock.advance(10)
    assert attempt_all(forwarding) == ["retry"]  # 10 s of the window spent
    assert pause(gw, {})[0] == 200
    clock.advance(600)  # ten times the window, paused
    assert attempt_all(forwarding) == []  # neither forwarded nor failed
    assert state_of(gw)["state"] == "queued"
    assert gw.post("/v1/sources/shop/resume", {})[0] == 200
    clock.advance(45)  # 55 s of the window spent: the pause's 600 s do not count
    assert attempt_all(forwarding) == ["retry"]  # a 500 again: still within the window
    clock.advance(4)
    assert attempt_all(forwarding) == ["delivered"]


def test_a_destinations_pause_still_fails_an_event_past_its_window(gw, sink, forwarding,
                                                                   clock):
    """The destination's Retry-After pause is not the operator's: its time counts."""
    sink.answer = lambda n, r: 500 if n == 0 else (503, {"Retry-After": "3600"})
    source = create_source(gw, gw.token, sink.url, retry_window_seconds=WINDOW,
                           ttl_seconds=TTL)
    deliver(gw, source)
    assert attempt_all(forwarding) == ["retry"]  # evt_1: a 500, tried again within 1 s
    deliver(gw, source, b'{"n": 2}', event_id="evt_2")
    assert attempt_all(forwarding) == ["failed"]  # evt_2: a pause longer than its window
    assert shown(gw)["paused"]["by"] == "destination"
    clock.advance(WINDOW + 1)
    assert attempt_all(forwarding) == ["failed"]  # evt_1, its window over: no forward
    assert len(sink.requests) == 2


def test_a_pause_with_an_end_ends_by_itself_and_shifts_the_windows(gw, sink, forwarding,
                                                                   clock):
    sink.answer = lambda n, r: 500 if n < 2 else 200
    source = create_source(gw, gw.token, sink.url, retry_window_seconds=WINDOW,
                           ttl_seconds=TTL)
    deliver(gw, source)
    assert attempt_all(forwarding) == ["retry"]
    status, body, _ = pause(gw, {"until": at(clock.now + 300 * 1_000_000)})
    assert status == 200 and body["source"]["paused"]["until"] == at(clock.now + 300e6)
    clock.advance(299)
    assert attempt_all(forwarding) == [] and shown(gw)["paused"]["by"] == "operator"
    clock.advance(2)  # over: shown as such at once; the round's sweep clears it
    assert shown(gw)["paused"] is None
    assert attempt_all(forwarding) == ["retry"]  # a 500, within the window moved by 300 s
    assert forwarding.end_pauses() == 0  # cleared already: nothing to end twice
    clock.advance(2)
    assert attempt_all(forwarding) == ["delivered"]


def test_an_expired_pause_is_cleared_once_and_its_time_added_once(gw, sink, forwarding,
                                                                  clock, gw_app):
    """Two sweeps (two relays) end the same pause: the window moves by its length once."""
    sink.answer = lambda n, r: 500
    source = create_source(gw, gw.token, sink.url, retry_window_seconds=WINDOW,
                           ttl_seconds=TTL)
    deliver(gw, source)
    assert attempt_all(forwarding) == ["retry"]
    start = clock.now
    assert pause(gw, {"until": at(clock.now + 100 * 1_000_000)})[0] == 200
    clock.advance(150)
    assert forwarding.end_pauses() == 1
    assert forwarding.end_pauses() == 0  # nothing left to end: not shifted twice
    events = gw_app.extensions["keystore"].gateway.forwarding.events
    with events.db.connection() as cur:
        cur.execute("SELECT window_start FROM hook_events")
        (window_start,), = cur.fetchall()
    assert window_start == start + 100 * 1_000_000  # accepted at start: moved by the 100 s


def test_a_new_pause_replaces_the_end_and_reason_of_the_one_on(gw, sink, clock):
    create_source(gw, gw.token, sink.url)
    assert pause(gw, {"reason": "one"})[0] == 200
    later = at(clock.now + 3600 * 1_000_000)
    status, body, _ = pause(gw, {"until": later, "reason": "two"})
    assert status == 200
    assert body["source"]["paused"] == {"by": "operator", "until": later, "reason": "two"}


def test_resume_ends_a_destinations_pause_and_an_operators(gw, sink, forwarding):
    sink.answer = lambda n, r: (429, {"Retry-After": "600"}) if n == 0 else 200
    source = create_source(gw, gw.token, sink.url)
    deliver(gw, source)
    assert attempt_all(forwarding) == ["retry"]
    assert pause(gw, {"reason": "looking into it"})[0] == 200
    assert shown(gw)["paused"]["by"] == "operator"  # shown first while both are on
    assert gw.post("/v1/sources/shop/resume", {})[0] == 200
    assert shown(gw)["paused"] is None and shown(gw)["paused_until"] is None
    assert attempt_all(forwarding) == ["delivered"]


YEAR = 366 * 86_400 * 1_000_000


@pytest.mark.parametrize("until", [
    "2026-13-01T00:00:00Z",  # no month 13
    "2027-02-30T00:00:00Z",  # no February 30
    "2027-06-31T00:00:00Z",  # June has 30 days
    "2026-12-31T23:59:60Z",  # a leap second: not an instant Python (or we) can keep
    "2027-01-01T24:00:00Z",
    "2027-01-01T00:00:00",  # no zone
    "2027-01-01T00:00:00+24:00",  # an offset out of range
    "\uff12\uff10\uff12\uff17-01-01T00:00:00Z",  # full-width digits
    "\u0662\u0660\u0662\u0667-01-01T00:00:00Z",  # Arabic-Indic digits
    "2027-01-01 00:00:00Z\n", "tomorrow", "", "9" * 10_000, "99999-01-01T00:00:00Z",
    1798761600, 9223372036854775808, True, ["2027-01-01T00:00:00Z"], {"at": 1},
])
def test_a_bad_until_is_400_and_changes_nothing(gw, sink, until):
    create_source(gw, gw.token, sink.url)
    status, body, _ = pause(gw, {"until": until})
    assert status == 400, body
    assert body["error"]["code"] == "invalid_request"
    assert shown(gw)["paused"] is None


@pytest.mark.parametrize("offset", [-1, 0, YEAR + 1_000_000, 10 ** 9 * 1_000_000])
def test_an_until_in_the_past_or_over_a_year_ahead_is_400(gw, sink, clock, offset):
    create_source(gw, gw.token, sink.url)
    status, body, _ = pause(gw, {"until": at(clock.now + offset)})
    assert status == 400 and body["error"]["details"] == {"field": "until"}, body
    assert shown(gw)["paused"] is None


def test_an_until_a_year_ahead_is_taken(gw, sink, clock):
    create_source(gw, gw.token, sink.url)
    assert pause(gw, {"until": at(clock.now + YEAR)})[0] == 200


@pytest.mark.parametrize("body", [
    {"reason": "line\nbreak"}, {"reason": "cr\rhere"}, {"reason": "nul\x00"},
    {"reason": "c1\u0085"}, {"reason": "x" * 257}, {"reason": ""}, {"reason": 12},
    {"reason": "\ud800"}, {"why": "unknown field"}, {"until": None, "extra": 1},
])
def test_a_bad_reason_or_field_is_400_and_changes_nothing(gw, sink, body):
    create_source(gw, gw.token, sink.url)
    status, answer, _ = pause(gw, body)
    assert status == 400, answer
    assert shown(gw)["paused"] is None


def test_a_pause_of_no_such_source_or_by_a_client_is_refused(gw, sink, op):
    create_source(gw, gw.token, sink.url)
    assert pause(gw, {}, name="nope")[0] == 404
    assert pause(gw, {}, name="NUL\x00")[0] == 404
    status, _, _ = gw.post("/v1/sources/shop/pause", {}, token=op["client"])
    assert status == 403
    status, _, _ = gw.post("/v1/sources/shop/pause", {}, token=op["globex"])
    assert status == 404  # another tenant's source is not found
    status, body, _ = gw.post("/v1/sources/shop/pause", raw=b'{"until": ', headers={
        "Content-Type": "application/json"})
    assert status == 400 and shown(gw)["paused"] is None


def test_the_queue_shows_each_state_and_the_next_attempt(gw, sink, forwarding, clock):
    sink.answer = lambda n, r: (500, {"Retry-After": "600"}) if n == 0 else 400
    source = create_source(gw, gw.token, sink.url)
    deliver(gw, source, b'{"n": 1}', event_id="evt_1")
    received = clock.now
    assert attempt_all(forwarding) == ["retry"]  # evt_1 waits 600 s
    clock.advance(1)
    deliver(gw, source, b'{"n": 2}', event_id="evt_2")
    assert attempt_all(forwarding) == ["failed"]  # a 400: failed for good
    deliver(gw, source, b'{"n": 1, "changed": true}', event_id="evt_1")  # held
    queue = shown(gw)["queue"]
    assert queue == {"queued": 1, "delivering": 0, "held": 1, "failed": 1,
                     "oldest_queued_at": at(received), "next_attempt_at": at(received + 600e6)}
    listed = gw.get("/v1/sources")[1]["sources"][0]
    assert listed["queue"] == queue and listed["paused"] is None


# --- retry now ------------------------------------------------------------------------------

def test_retry_now_makes_a_backed_off_event_due_at_once(gw, sink, forwarding):
    sink.answer = lambda n, r: (500, {"Retry-After": "600"}) if n == 0 else 200
    source = create_source(gw, gw.token, sink.url)
    deliver(gw, source)
    assert attempt_all(forwarding) == ["retry"]
    assert attempt_all(forwarding) == []  # 600 s to wait
    status, body, _ = gw.post("/v1/deliveries/retry", {"source": "shop", "event_id": "evt_1"})
    assert (status, body) == (202, {"due": 1})
    assert attempt_all(forwarding, ended=False) == ["delivered"]


def test_retry_now_of_a_source_makes_all_its_queued_events_due(gw, sink, forwarding):
    sink.answer = lambda n, r: (500, {"Retry-After": "600"}) if n < 3 else 200
    source = create_source(gw, gw.token, sink.url)
    for n in range(3):
        deliver(gw, source, b'{"n": %d}' % n, event_id=f"evt_{n}")
    assert attempt_all(forwarding) == ["retry"] * 3
    deliver(gw, source, b'{"n": 9}', event_id="evt_9")  # due already
    status, body, _ = gw.post("/v1/deliveries/retry", {"source": "shop"})
    assert (status, body) == (202, {"due": 4})
    assert sorted(attempt_all(forwarding, ended=False)) == ["delivered"] * 4


def test_retry_now_of_an_event_that_is_not_queued_is_409_with_its_state(gw, sink, forwarding):
    sink.answer = lambda n, r: 200 if n == 0 else 400
    source = create_source(gw, gw.token, sink.url)
    deliver(gw, source)
    assert attempt_all(forwarding) == ["delivered"]
    status, body, _ = gw.post("/v1/deliveries/retry", {"source": "shop", "event_id": "evt_1"})
    assert status == 409, body
    assert body["error"]["code"] == "already_completed"
    assert body["error"]["details"] == {"state": "delivered", "reason": "not_queued"}
    deliver(gw, source, b'{"n": 2}', event_id="evt_2")
    assert attempt_all(forwarding) == ["failed"]
    status, body, _ = gw.post("/v1/deliveries/retry", {"source": "shop", "event_id": "evt_2"})
    assert status == 409 and body["error"]["details"]["state"] == "failed"
    deliver(gw, source, b'{"n": 3}', event_id="evt_3")
    taken = forwarding.take("another-relay", 1)  # being forwarded
    assert len(taken) == 1
    status, body, _ = gw.post("/v1/deliveries/retry", {"source": "shop", "event_id": "evt_3"})
    assert status == 409 and body["error"]["code"] == "in_progress"
    assert body["error"]["details"]["state"] == "delivering"


@pytest.mark.parametrize("body, code", [
    ({"source": "nope"}, 404), ({"source": "shop", "event_id": "evt_none"}, 404),
    ({"source": "Shop"}, 400), ({"event_id": "evt_1"}, 400), ({}, 400),
    ({"source": "shop", "event_id": ""}, 400), ({"source": "shop", "event_id": "a\nb"}, 400),
    ({"source": "shop", "event_id": "x" * 513}, 400), ({"source": "shop", "event_id": 1}, 400),
    ({"source": "shop", "force": True}, 400), ({"source": ["shop"]}, 400),
])
def test_a_bad_retry_is_refused_and_changes_nothing(gw, sink, forwarding, body, code):
    sink.answer = lambda n, r: (500, {"Retry-After": "600"}) if n == 0 else 200
    source = create_source(gw, gw.token, sink.url)
    deliver(gw, source)
    assert attempt_all(forwarding) == ["retry"]
    status, answer, _ = gw.post("/v1/deliveries/retry", body)
    assert status == code, answer
    assert attempt_all(forwarding, ended=False) == []  # still waiting on its backoff


def test_retry_now_does_not_end_a_pause(gw, sink, forwarding):
    sink.answer = lambda n, r: (500, {"Retry-After": "600"}) if n == 0 else 200
    source = create_source(gw, gw.token, sink.url)
    deliver(gw, source)
    assert attempt_all(forwarding) == ["retry"]
    assert pause(gw, {})[0] == 200
    assert gw.post("/v1/deliveries/retry", {"source": "shop"})[1] == {"due": 1}
    assert attempt_all(forwarding) == []  # due, and held by the pause
    assert gw.post("/v1/sources/shop/resume", {})[0] == 200
    assert attempt_all(forwarding) == ["delivered"]


def test_another_tenants_event_is_not_retried(gw, sink, forwarding, op):
    sink.answer = lambda n, r: (500, {"Retry-After": "600"}) if n == 0 else 200
    deliver(gw, create_source(gw, gw.token, sink.url))
    assert attempt_all(forwarding) == ["retry"]
    status, _, _ = gw.post("/v1/deliveries/retry", {"source": "shop"}, token=op["globex"])
    assert status == 404
    status, _, _ = gw.post("/v1/deliveries/retry", {"source": "shop"}, token=op["client"])
    assert status == 403
    assert attempt_all(forwarding, ended=False) == []


@pytest.mark.parametrize("during", [True, False], ids=["during", "after"])
@pytest.mark.parametrize("resend", ["same", "changed"])
def test_a_resend_after_a_long_pause_is_still_the_same_event(gw, sink, forwarding, clock,
                                                              resend, during):
    """An event held by an operator's pause longer than its retry window stays the one
    event its provider's resend finds: a plain repeat (200 duplicate), or a changed body
    held for a person, never a new incarnation that takes over the first (its record's
    lease is moved on with the window when the pause ends)."""
    source = create_source(gw, gw.token, sink.url, retry_window_seconds=WINDOW,
                           ttl_seconds=TTL)
    assert pause(gw, {})[0] == 200
    assert deliver(gw, source)[0] == 202
    clock.advance(WINDOW * 3)  # paused for three times the window
    if not during:
        assert gw.post("/v1/sources/shop/resume", {})[0] == 200
        clock.advance(WINDOW // 2)  # within the window the pause moved on
    body = BODY if resend == "same" else BODY.replace(b"}", b', "changed": true}')
    status, answer = deliver(gw, source, body=body)[:2]
    assert (status, answer["status"]) == (200, "duplicate" if resend == "same" else "held")
    if during:
        assert gw.post("/v1/sources/shop/resume", {})[0] == 200
    assert attempt_all(forwarding) == ["delivered"]
    assert len(sink.requests) == 1
