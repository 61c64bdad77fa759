"""The Webhooks section's controls (issue 27), on both backends, through the page's forms:
Pause (a reason and an end, each by the API's rules; the reason shown escaped), Resume,
Retry now on a source and on a queued event, and per source its health, queue and pause.
Every refusal changes nothing; a form without its CSRF token is refused."""
from __future__ import annotations

import pytest

from .hooks_support import create_source, deliver, hooks_settings, pump, sink, text
from .support import forms

__all__ = ["sink"]


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


@pytest.fixture
def ana(browser, tokens):
    browser.sign_in(tokens["ana"])
    return browser


def paused(operator):
    return operator.get("/v1/sources/shop")[1]["source"]["paused"]


def test_a_source_is_paused_and_resumed_from_the_page(app, ana, operator, tokens, sink):
    shop = create_source(operator, tokens["ana"], sink.url)
    ana.get("/ui/hooks")
    (form,) = [f for f in forms(ana.html) if f["action"] == "/ui/hooks/pause"]
    assert form["hidden"] == {"csrf_token": ana.csrf, "source": "shop"}
    resp = ana.post("/ui/hooks/pause", {"source": "shop",
                                        "reason": "<script>alert(1)</script> deploy"})
    assert resp.status_code == 303 and resp.headers["Location"] == "/ui/hooks?done=paused"
    assert paused(operator) == {"by": "operator", "until": None,
                                "reason": "<script>alert(1)</script> deploy"}
    assert deliver(app.test_client(), shop) == 202  # accepted while paused
    assert pump(app) == [] and sink.requests == []
    ana.get("/ui/hooks")
    assert "<script>alert(1)</script>" not in ana.html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; deploy" in ana.html
    page = text(ana.html)
    assert "paused by an operator" in page and "until resumed" in page
    assert "when resumed" in page  # the next forward
    assert not [f for f in forms(ana.html) if f["action"] == "/ui/hooks/pause"]
    ana.post("/ui/hooks/resume", {"source": "shop"})
    assert paused(operator) is None
    assert pump(app) == ["delivered"]


@pytest.mark.parametrize("fields", [
    {"until": "2027-02-30T00:00:00Z"}, {"until": "\uff12\uff10\uff12\uff17-01-01T00:00:00Z"},
    {"until": "2027-01-01T00:00:00"}, {"until": "tomorrow"}, {"until": "2020-01-01T00:00:00Z"},
    {"until": "2099-01-01T00:00:00Z"}, {"reason": "two\r\nlines"}, {"reason": "x" * 257},
    {"reason": "nul\x00"}, {"source": "nope"}, {"source": "Shop"}, {"source": "shop\r\nX: 1"},
])
def test_a_bad_pause_changes_nothing(app, ana, operator, tokens, sink, fields):
    create_source(operator, tokens["ana"], sink.url)
    ana.get("/ui/hooks")
    resp = ana.post("/ui/hooks/pause", {"source": "shop", **fields})
    assert resp.status_code in (400, 404), fields
    assert "Traceback" not in ana.html and "Something went wrong" not in ana.html
    assert paused(operator) is None


def test_a_pause_without_its_csrf_token_is_refused(app, ana, operator, tokens, sink):
    create_source(operator, tokens["ana"], sink.url)
    ana.get("/ui/hooks")
    resp = ana.post("/ui/hooks/pause", {"source": "shop"}, csrf=False)
    assert resp.status_code in (400, 403)
    resp = ana.post("/ui/hooks/retry", {"source": "shop"}, csrf=False)
    assert resp.status_code in (400, 403)
    assert paused(operator) is None


def test_a_pause_with_an_end_is_shown_with_it(app, ana, operator, tokens, sink, clock):
    create_source(operator, tokens["ana"], sink.url)
    ana.get("/ui/hooks")
    resp = ana.post("/ui/hooks/pause", {"source": "shop", "until": "2027-01-16T00:00:00Z",
                                        "reason": ""})
    assert resp.status_code == 303, text(ana.html)
    assert paused(operator) == {"by": "operator", "until": "2027-01-16T00:00:00.000000Z",
                                "reason": None}


def test_retry_now_on_a_source_and_on_an_event(app, ana, operator, tokens, sink):
    sink.answer = lambda n, r: (500, {"Retry-After": "600"}) if n < 2 else 200
    shop = create_source(operator, tokens["ana"], sink.url)
    assert deliver(app.test_client(), shop) == 202
    assert deliver(app.test_client(), shop, b'{"n": 2}', "evt_2") == 202
    assert pump(app) == ["retry", "retry"]
    assert pump(app) == []  # ten minutes to wait
    ana.get("/ui/hooks")
    page = text(ana.html)
    assert "failing" in page and "HTTP 500" in page  # health and last error
    (form,) = [f for f in forms(ana.html) if f["action"] == "/ui/hooks/retry"]
    assert form["hidden"] == {"csrf_token": ana.csrf, "source": "shop"}
    ana.get("/ui/hooks/event", source="shop", event_id="evt_1")
    (one,) = [f for f in forms(ana.html) if f["action"] == "/ui/hooks/retry"]
    assert one["hidden"] == {"csrf_token": ana.csrf, "source": "shop", "event_id": "evt_1"}
    resp = ana.post("/ui/hooks/retry", one["hidden"])
    assert resp.status_code == 303
    assert resp.headers["Location"] == "/ui/hooks/event?source=shop&event_id=evt_1&done=retried"
    assert pump(app) == ["delivered"]  # evt_1 only
    ana.get("/ui/hooks/event", source="shop", event_id="evt_1")
    assert not [f for f in forms(ana.html) if f["action"] == "/ui/hooks/retry"]
    resp = ana.post("/ui/hooks/retry", {"source": "shop", "event_id": "evt_1"})
    assert resp.status_code == 409 and "delivered, not queued" in text(ana.html)
    ana.get("/ui/hooks")
    resp = ana.post("/ui/hooks/retry", {"source": "shop"})
    assert resp.status_code == 303 and resp.headers["Location"] == "/ui/hooks?done=retried"
    assert pump(app) == ["delivered"]  # evt_2
    ana.get("/ui/hooks")
    assert "ok" in text(ana.html).split("Health", 1)[1]


@pytest.mark.parametrize("fields", [
    {"source": "nope"}, {"source": "shop", "event_id": "evt_none"},
    {"source": "shop", "event_id": "a\nb"}, {"source": ""}, {"source": "shop\x00"},
])
def test_a_bad_retry_changes_nothing(app, ana, operator, tokens, sink, fields):
    sink.answer = lambda n, r: (500, {"Retry-After": "600"}) if n == 0 else 200
    shop = create_source(operator, tokens["ana"], sink.url)
    assert deliver(app.test_client(), shop) == 202
    assert pump(app) == ["retry"]
    ana.get("/ui/hooks")
    resp = ana.post("/ui/hooks/retry", fields)
    assert resp.status_code in (400, 404), fields
    assert "Traceback" not in ana.html
    assert pump(app) == []
