"""The Webhooks page and a destination's serial ordering per key (issue 29, "Ordering per
key", serial), through Flask's test client on both backends: a queued event that its key's
earlier event holds is listed with "waits on" and a link to that event (instead of its next
forward and a Retry now, which would not move it), and its page says what it waits on and
why; the earlier event (being retried) shows its next forward as before. Once that one is
delivered, the page says nothing of the kind. The ordering is set by PATCH
/v1/sources/shop; the relay is pumped by hand (hooks_support.pump)."""
from __future__ import annotations

import json
import re

import pytest

from .hooks_support import ana, deliver, hooks_settings, patch_ordering, pump, shop, sink, text

__all__ = ["ana", "shop", "sink"]


def body(event_id: str, key: str) -> bytes:
    return json.dumps({"id": event_id, "type": "order.updated", "data": {"id": key}}).encode()


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


def test_a_waiting_event_says_what_it_waits_on(app, ana, operator, tokens, shop, sink, clock):
    fails = {"evt_a1"}
    sink.answer = lambda n, r: 500 if json.loads(r["body"])["id"] in fails else 200
    patch_ordering(app, tokens, sink.url, {"key": "/data/id", "mode": "serial"})
    client = app.test_client()
    for event_id, key in (("evt_a1", "A"), ("evt_a2", "A"), ("evt_b1", "B")):
        assert deliver(client, shop, body(event_id, key), event_id) == 202
    assert sorted(pump(app)) == ["delivered", "retry"]  # evt_a1 refused, evt_b1 delivered

    assert ana.get("/ui/hooks/deliveries", source="shop", state="queued").status_code == 200
    rows = {re.search(r"event_id=(evt_\w+)", r).group(1): r
            for r in re.findall(r"<tr>.*?</tr>", ana.html, re.S)[1:]}
    assert set(rows) == {"evt_a1", "evt_a2"}
    waiting = rows["evt_a2"]
    assert "waits on evt_a1" in text(waiting), text(waiting)
    assert 'href="/ui/hooks/event?source=shop&amp;event_id=evt_a1"' in waiting
    assert "goes after the earlier event of its key" in text(waiting)
    assert "Retry now" not in text(waiting) and "next " not in text(waiting)
    assert "waits on" not in text(rows["evt_a1"]) and "next " in text(rows["evt_a1"])

    assert ana.get("/ui/hooks/event", source="shop", event_id="evt_a2").status_code == 200
    page = text(ana.html)
    assert "Waiting on The destination takes the events of this key one at a time" in page
    assert "once the earlier event evt_a1 is delivered or has failed for good" in page
    assert 'href="/ui/hooks/event?source=shop&amp;event_id=evt_a1"' in ana.html
    assert "Retry now" not in page and "next forward" not in page
    ana.get("/ui/hooks/event", source="shop", event_id="evt_a1")
    assert "Waiting on" not in text(ana.html) and "next forward" in text(ana.html)

    fails.clear()
    clock.advance(2)  # evt_a1's retry (the first backoff is at most 1 s)
    assert pump(app) == ["delivered"] and pump(app) == ["delivered"]  # evt_a1, then evt_a2
    assert [json.loads(r["body"])["id"] for r in sink.requests] == [
        "evt_a1", "evt_b1", "evt_a1", "evt_a2"]
    ana.get("/ui/hooks/event", source="shop", event_id="evt_a2")
    assert "Waiting on" not in text(ana.html) and "state-delivered" in ana.html


def test_newer_wins_waiting_is_told_and_a_hostile_event_id_stays_text(app, ana, operator,
                                                                      tokens, shop, sink):
    """newer_wins holds an event while another of its key is being forwarded: the listing and
    the event's page say what it waits on, in newer_wins' words. The event id it waits on is
    the provider's own text (markup, quotes, `&`, `?`, `#`, `%`, non-ASCII): it is escaped in
    the page and percent-encoded in the link, never markup or another query."""
    hostile = "evt_<b>x</b>&\"'?#%2F\u00e9"
    patch_ordering(app, tokens, sink.url, {"key": "/data/id", "mode": "newer_wins",
                                           "version": "/data/v"})
    client = app.test_client()
    for event_id, v in ((hostile, 1), ("evt_2", 2)):
        raw = json.dumps({"id": event_id, "type": "order.updated",
                          "data": {"id": "A", "v": v}}).encode()
        assert deliver(client, shop, raw, event_id) == 202
    forwarding = app.extensions["keystore"].gateway.forwarding
    from .hooks_support import HOLDER
    (job,) = forwarding.take(HOLDER, 16)  # the hostile one; evt_2 waits for it
    assert job.event.event_id == hostile

    assert ana.get("/ui/hooks/deliveries", source="shop").status_code == 200
    row = next(r for r in re.findall(r"<tr>.*?</tr>", ana.html, re.S) if "evt_2" in r)
    assert "<b>x</b>" not in ana.html and "&lt;b&gt;x&lt;/b&gt;&amp;&#34;&#39;?#%2Fé" in row
    # `&`, `#`, `%` and `"` percent-encoded, `'` escaped; `?` and `/` may stand in a query
    link = "/ui/hooks/event?source=shop&amp;event_id=evt_%3Cb%3Ex%3C/b%3E%26%22&#39;?%23%252F%C3%A9"
    assert f'href="{link}"' in row, row
    ana.get("/ui/hooks/event", source="shop", event_id="evt_2")
    page = text(ana.html)
    assert "one at a time, newest wins" in page and "compared with the last delivered" in page
    assert "<b>x</b>" not in ana.html and f'href="{link}"' in ana.html
    import html as html_module
    followed = ana.get(html_module.unescape(link))  # the link leads to the hostile event
    assert followed.status_code == 200 and "Waiting on" not in text(ana.html)
    assert "&lt;b&gt;x&lt;/b&gt;&amp;&#34;&#39;?#%2Fé" in ana.html and "<b>x</b>" not in ana.html
    forwarding.settle(job, HOLDER, forwarding.forward(job))
    assert pump(app) == ["delivered"]  # evt_2, newer, once the hostile one is delivered
