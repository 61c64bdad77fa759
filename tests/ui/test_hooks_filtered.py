"""The Webhooks section and a destination's filter (issue 29, first part), through Flask's
test client on both backends: the source's filter shown where its destination is (type globs
and match conditions, escaped, invisible characters made visible, long lists cut), and an
event the filter does not take shown as `filtered` with its sentence, listed by that state,
and redelivered from the page once the filter takes it. The filter is set by PATCH
/v1/sources/shop, as an operator sets it; forms the API refuses are written into the source's
config through the store. The relay is pumped by hand on the test clock (hooks_support.pump)."""
from __future__ import annotations

import html
import json
import re

import pytest

from .hooks_support import ana, deliver, hooks_settings, pump, shop, sink, text
from .support import forms

__all__ = ["ana", "shop", "sink"]
SENTENCE = "The destination's filter does not take this event: nothing was sent."
INVOICE = json.dumps({"id": "evt_inv", "type": "invoice.paid",
                      "data": {"status": "paid"}}).encode()
CUSTOMER = json.dumps({"id": "evt_cus", "type": "customer.created",
                       "data": {"status": "new"}}).encode()


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


def patch_filter(app, tokens, url: str, given) -> dict:
    """acme's source "shop"'s destination filter set as an operator does, by PATCH
    /v1/sources/shop (None: no filter); the answer's destination."""
    r = app.test_client().patch("/v1/sources/shop", json={"destination": {
        "url": url, "filter": given}}, headers={"Authorization": f"Bearer {tokens['ana']}"})
    assert r.status_code == 200, r.get_json()
    return r.get_json()["source"]["destination"]


def store_filter(app, tokens, given) -> None:
    """A stored form the API would refuse, written into the source's config (its
    forward.filter) through the store: the page must not fail on it."""
    ks = app.extensions["keystore"]
    store, clock = ks.gateway.sources.store, ks.gateway.sources.clock
    tenant_id = ks.accounts.principal(tokens["ana"]).tenant_id
    with store.transaction() as cur:
        source = store.named(tenant_id, "shop", cur)
        options = source.options
        options.setdefault("forward", {})["filter"] = given
        store.change(cur, source, {"config": json.dumps(options)}, clock())


def source_row(html: str, name: str = "shop") -> str:
    (row,) = [r for r in re.findall(r"<tr>.*?</tr>", html, re.S)
              if text(r).startswith(f"{name} testing ")]
    return row


def test_the_sources_filter_is_shown_where_its_destination_is_escaped(
        app, ana, tokens, shop, sink):
    long_value = "v" * 300
    patch_filter(app, tokens, sink.url, {
        "event_types": ["invoice.*", "<b>bold</b>.*"],
        "match": [{"pointer": "/data/<i>", "equals": "<script>alert(1)</script>"},
                  {"pointer": "/data/id", "in": [1, 2**63, "٢", "x", None, True, "more"]},
                  {"pointer": "/a\u202eb\nc", "exists": False},
                  {"pointer": "/data/note", "equals": long_value},
                  {"pointer": "", "exists": True}]})
    assert ana.get("/ui/hooks").status_code == 200
    row = source_row(ana.html)
    shown = html.unescape(text(row))
    assert shown.startswith(f"shop testing active {sink.url} Filter, all of: "), shown
    assert "type invoice.* or <b>bold</b>.*" in shown
    assert '/data/<i> equals "<script>alert(1)</script>"' in shown
    assert f'/data/id is one of 1 , {2**63} , "٢" , "x" , null and 2 more' in shown
    assert r"/a\u202eb\u000ac does not exist" in shown  # made visible, on one line
    assert '/data/note equals "' + "v" * 119 + "…" in shown and "v" * 120 not in row
    assert '"" exists' in shown
    for raw in ("<script>", "<b>bold", "<i>", "\u202e"):
        assert raw not in ana.html, raw
    # the event's page shows it beside the destination too
    assert deliver(app.test_client(), shop, INVOICE, "evt_inv") == 202
    assert ana.get("/ui/hooks/event", source="shop", event_id="evt_inv").status_code == 200
    head = html.unescape(text(ana.html.split("<section", 1)[0]))
    assert f"→ {sink.url} Filter, all of: type invoice.* or <b>bold</b>.* " in head, head
    assert "<script>" not in ana.html and "\u202e" not in ana.html


def test_without_a_filter_nothing_is_said_and_odd_stored_forms_give_a_calm_page(
        app, ana, tokens, shop, sink):
    assert deliver(app.test_client(), shop, INVOICE, "evt_inv") == 202
    pages = ("/ui/hooks", "/ui/hooks/event?source=shop&event_id=evt_inv")
    for path in pages:
        assert ana.get(path).status_code == 200 and "Filter" not in text(ana.html), path
    assert patch_filter(app, tokens, sink.url, {})["filter"] == {}
    for path in pages:
        assert ana.get(path).status_code == 200, path
        assert "Filter: it takes every event." in text(ana.html), path
    for odd in ({"event_types": []}, {"event_types": "invoice.*"}, ["x"], "x", 7,
                {"match": [{"pointer": "nope", "exists": True}]}, {"colour": "red"}):
        store_filter(app, tokens, odd)
        for path in pages:
            assert ana.get(path).status_code == 200, (odd, path)
            assert "Filter: its stored form does not read" in text(ana.html), (odd, path)
    assert patch_filter(app, tokens, sink.url, None)["filter"] is None
    for path in pages:
        assert ana.get(path).status_code == 200 and "Filter" not in text(ana.html), path


def test_a_filtered_event_is_shown_as_filtered_and_redelivered_once_the_filter_takes_it(
        app, ana, operator, tokens, shop, sink):
    patch_filter(app, tokens, sink.url, {"event_types": ["invoice.*"]})
    client = app.test_client()
    assert deliver(client, shop, INVOICE, "evt_inv") == 202
    assert deliver(client, shop, CUSTOMER, "evt_cus") == 202
    pump(app)
    assert [json.loads(r["body"])["id"] for r in sink.requests] == ["evt_inv"]

    assert ana.get("/ui/hooks/deliveries", source="shop", state="filtered").status_code == 200
    (row,) = re.findall(r"<tr>.*?</tr>", ana.html, re.S)[1:]
    assert text(row).startswith("evt_cus customer.created shop default filtered "), text(row)
    assert 'class="state state-filtered"' in row and "nothing was sent" in text(row)
    assert 'href="/ui/hooks/event?source=shop&amp;event_id=evt_cus#filtered"' in row
    assert '<option value="filtered" selected>' in ana.html
    ana.get("/ui/hooks/deliveries", source="shop")
    assert "evt_inv" in ana.html and "evt_cus" in ana.html

    assert ana.get("/ui/hooks/event", source="shop", event_id="evt_cus").status_code == 200
    page = text(ana.html)
    assert "filtered source shop (testing) → " in page and 'class="state state-filtered"' \
        in ana.html
    assert f"Filtered {SENTENCE}" in page
    assert "Forwards None: the destination's filter does not take this event" in page
    assert "<dt>Delivered</dt>" not in ana.html
    assert re.search(r"Record [^<]*? / evt_cus succeeded", page), page
    (record_url,) = set(re.findall(r'href="(/ui/record\?[^"]+)"', ana.html))
    assert ana.get(html.unescape(record_url)).status_code == 200
    assert '"filtered": true' in html.unescape(ana.html)  # the record's result
    found = operator.get("/v1/deliveries", event_id="evt_cus", source="shop")[1]
    assert found["deliveries"][0]["state"] == "filtered"
    # the delivered one says nothing of the kind
    ana.get("/ui/hooks/event", source="shop", event_id="evt_inv")
    assert SENTENCE not in text(ana.html) and "state-filtered" not in ana.html

    # Redeliver from the page: queued again, the filter decides again at its turn
    patch_filter(app, tokens, sink.url, {"event_types": ["invoice.*", "customer.*"]})
    ana.get("/ui/hooks/event", source="shop", event_id="evt_cus")
    (form,) = [f for f in forms(ana.html) if f["action"] == "/ui/hooks/redeliver"]
    assert form["hidden"] == {"csrf_token": ana.csrf, "source": "shop", "event_id": "evt_cus"}
    resp = ana.post("/ui/hooks/redeliver", form["hidden"])
    assert resp.status_code == 303, ana.html
    assert resp.headers["Location"].endswith("event_id=evt_cus&done=redelivered")
    pump(app)
    assert [json.loads(r["body"])["id"] for r in sink.requests] == ["evt_inv", "evt_cus"]
    ana.get("/ui/hooks/event", source="shop", event_id="evt_cus")
    assert SENTENCE not in text(ana.html) and "state-delivered" in ana.html


def test_a_filtered_event_whose_filter_still_refuses_it_stays_filtered(
        app, ana, tokens, shop, sink):
    patch_filter(app, tokens, sink.url, {"match": [{"pointer": "/data/status", "equals": "paid"}]})
    assert deliver(app.test_client(), shop, CUSTOMER, "evt_cus") == 202
    pump(app)
    ana.get("/ui/hooks/event", source="shop", event_id="evt_cus")
    assert SENTENCE in text(ana.html)
    (form,) = [f for f in forms(ana.html) if f["action"] == "/ui/hooks/redeliver"]
    assert ana.post("/ui/hooks/redeliver", form["hidden"]).status_code == 303
    pump(app)
    assert sink.requests == []
    ana.get("/ui/hooks/event", source="shop", event_id="evt_cus")
    assert SENTENCE in text(ana.html) and 'class="state state-filtered"' in ana.html
