"""The Webhooks page and a destination's ordering per key (issue 29, "Ordering per key",
newer_wins), through Flask's test client on both backends: an event superseded by a newer
version of its key is listed under state=superseded ("nothing was sent", a link to its
page), its page shows the state and the sentence naming the event that was delivered, no
forwards, and a Redeliver that needs no confirmation and compares it again at its turn. The
ordering is set by PATCH /v1/sources/shop; the relay is pumped by hand (hooks_support.pump)."""
from __future__ import annotations

import json
import re

import pytest

from .hooks_support import ana, deliver, hooks_settings, patch_ordering, pump, shop, sink, text
from .support import forms

__all__ = ["ana", "shop", "sink"]
SENTENCE = "A newer version of this key was delivered (event evt_new): nothing was sent."


def body(event_id: str, version: int) -> bytes:
    return json.dumps({"id": event_id, "type": "invoice.updated",
                       "data": {"id": "in_1", "v": version}}).encode()


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


def test_a_superseded_event_is_shown_as_such_and_redelivered_from_its_page(
        app, ana, operator, tokens, shop, sink):
    patch_ordering(app, tokens, sink.url,
                   {"key": "/data/id", "mode": "newer_wins", "version": "/data/v"})
    client = app.test_client()
    assert deliver(client, shop, body("evt_new", 2), "evt_new") == 202
    assert pump(app) == ["delivered"]
    assert deliver(client, shop, body("evt_old", 1), "evt_old") == 202
    assert pump(app) == ["superseded"]
    assert [json.loads(r["body"])["id"] for r in sink.requests] == ["evt_new"]

    assert ana.get("/ui/hooks/deliveries", source="shop", state="superseded").status_code == 200
    (row,) = re.findall(r"<tr>.*?</tr>", ana.html, re.S)[1:]
    assert text(row).startswith("evt_old invoice.updated shop default superseded "), text(row)
    assert 'class="state state-superseded"' in row and "nothing was sent" in text(row)
    assert 'href="/ui/hooks/event?source=shop&amp;event_id=evt_old#superseded"' in row
    assert '<option value="superseded" selected>' in ana.html

    assert ana.get("/ui/hooks/event", source="shop", event_id="evt_old").status_code == 200
    page = re.sub(r" \)", ")", text(ana.html))  # the link's tags leave a space
    assert 'class="state state-superseded"' in ana.html
    assert f"Superseded {SENTENCE}" in page
    assert 'href="/ui/hooks/event?source=shop&amp;event_id=evt_new"' in ana.html
    assert "Forwards None: a newer version of this key was delivered first" in page
    assert "<dt>Delivered</dt>" not in ana.html
    ana.get("/ui/hooks/event", source="shop", event_id="evt_new")
    assert "Superseded" not in text(ana.html) and "state-superseded" not in ana.html

    # Redeliver without a confirmation: compared again, still superseded
    ana.get("/ui/hooks/event", source="shop", event_id="evt_old")
    (form,) = [f for f in forms(ana.html) if f["action"] == "/ui/hooks/redeliver"]
    assert form["hidden"] == {"csrf_token": ana.csrf, "source": "shop", "event_id": "evt_old"}
    assert ana.post("/ui/hooks/redeliver", form["hidden"]).status_code == 303
    assert pump(app) == ["superseded"]
    # once the ordering is cleared it goes out
    patch_ordering(app, tokens, sink.url, None)
    ana.get("/ui/hooks/event", source="shop", event_id="evt_old")
    (form,) = [f for f in forms(ana.html) if f["action"] == "/ui/hooks/redeliver"]
    assert ana.post("/ui/hooks/redeliver", form["hidden"]).status_code == 303
    assert pump(app) == ["delivered"]
    assert [json.loads(r["body"])["id"] for r in sink.requests] == ["evt_new", "evt_old"]
    ana.get("/ui/hooks/event", source="shop", event_id="evt_old")
    assert "Superseded" not in text(ana.html) and "state-delivered" in ana.html
