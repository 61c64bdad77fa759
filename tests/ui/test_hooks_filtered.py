"""The Webhooks section and a destination's filter (issue 29, first part), through Flask's
test client on both backends: the source's filter shown where its destination is (type globs
and match conditions, escaped, invisible characters made visible, long lists cut). The filter
is written into the source's config through the store, as the API keeps it (forward.filter,
the normal form)."""
from __future__ import annotations

import html
import json
import re

import pytest

from .hooks_support import ana, deliver, hooks_settings, shop, sink, text

__all__ = ["ana", "shop", "sink"]
INVOICE = json.dumps({"id": "evt_inv", "type": "invoice.paid",
                      "data": {"status": "paid"}}).encode()


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


def set_filter(app, tokens, given, name: str = "shop") -> None:
    """acme's source's destination filter, as part API stores it: forward.filter in its
    config (absent when `given` is None); any other value is stored as it is."""
    ks = app.extensions["keystore"]
    store, clock = ks.gateway.sources.store, ks.gateway.sources.clock
    tenant_id = ks.accounts.principal(tokens["ana"]).tenant_id
    with store.transaction() as cur:
        source = store.named(tenant_id, name, cur)
        options = source.options
        options.setdefault("forward", {}).pop("filter", None)
        if given is not None:
            options["forward"]["filter"] = given
        store.change(cur, source, {"config": json.dumps(options)}, clock())


def source_row(html: str, name: str = "shop") -> str:
    (row,) = [r for r in re.findall(r"<tr>.*?</tr>", html, re.S)
              if text(r).startswith(f"{name} testing ")]
    return row


def test_the_sources_filter_is_shown_where_its_destination_is_escaped(
        app, ana, tokens, shop, sink):
    long_value = "v" * 300
    set_filter(app, tokens, {
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
    set_filter(app, tokens, {})
    for path in pages:
        assert ana.get(path).status_code == 200, path
        assert "Filter: it takes every event." in text(ana.html), path
    for odd in ({"event_types": []}, {"event_types": "invoice.*"}, ["x"], "x", 7,
                {"match": [{"pointer": "nope", "exists": True}]}, {"colour": "red"}):
        set_filter(app, tokens, odd)
        for path in pages:
            assert ana.get(path).status_code == 200, (odd, path)
            assert "Filter: its stored form does not read" in text(ana.html), (odd, path)
