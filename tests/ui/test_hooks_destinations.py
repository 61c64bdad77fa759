"""The Webhooks pages and a source with several destinations (issue 29, "Routing: several
destinations"), through Flask's test client on both backends: the sources' list shows each
destination with its filter and its failing state; the deliveries listing has a line per
destination; an event's page shows its deliveries side by side, each its own page, and a
redelivery from one destination's page sends that delivery only. The relay is pumped by
hand (hooks_support.pump)."""
from __future__ import annotations

import json
import re

import pytest

from tests.gateway.support import SECRET, Sink

from .hooks_support import ana, deliver, hooks_settings, pump, text

__all__ = ["ana"]


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


@pytest.fixture
def sinks():
    made = [Sink(), Sink(lambda n, r: 400 if n == 0 else 200)]
    yield made
    for s in made:
        s.close()


@pytest.fixture
def shop(app, tokens, sinks) -> dict:
    r = app.test_client().post("/v1/sources", json={
        "name": "shop", "provider": "testing", "secrets": [SECRET], "destinations": [
            {"name": "billing", "url": sinks[0].url},
            {"name": "crm", "url": sinks[1].url,
             "filter": {"event_types": ["customer.*", "order.*"]}}]},
        headers={"Authorization": f"Bearer {tokens['ana']}"})
    assert r.status_code == 201, r.get_json()
    return r.get_json()["source"]


def test_each_destination_is_shown_and_redelivered_on_its_own(app, ana, shop, sinks):
    body = json.dumps({"id": "evt_1", "type": "order.paid"}).encode()
    assert deliver(app.test_client(), shop, body, "evt_1") == 202
    assert sorted(pump(app)) == ["delivered", "failed"]  # crm refused it once

    assert ana.get("/ui/hooks").status_code == 200
    page = text(ana.html)
    assert "billing" in page and "crm failing" in page
    assert sinks[1].url in ana.html and "type customer.* or order.*" in page

    assert ana.get("/ui/hooks/deliveries", source="shop").status_code == 200
    rows = re.findall(r"<tr>.*?</tr>", ana.html, re.S)[1:]
    assert sorted(re.search(r"<td><code>(billing|crm)</code></td>", r).group(1)
                  for r in rows) == ["billing", "crm"]
    crm = next(r for r in rows if "<td><code>crm</code></td>" in r)
    assert 'name="destination" value="crm"' in crm  # its Redeliver names it

    assert ana.get("/ui/hooks/event", source="shop", event_id="evt_1").status_code == 200
    page = text(ana.html)
    assert "Deliveries (one per destination)" in page
    assert "billing (shown) delivered" in page and "crm failed" in page
    assert 'href="/ui/hooks/event?source=shop&amp;event_id=evt_1&amp;destination=crm"' \
        in ana.html
    assert ana.get("/ui/hooks/event", source="shop", event_id="evt_1",
                   destination="crm").status_code == 200
    assert "destination crm" in text(ana.html)
    r = ana.post("/ui/hooks/redeliver", {"source": "shop", "event_id": "evt_1",
                                         "destination": "crm"})
    assert r.status_code == 303 and "destination=crm" in r.headers["Location"]
    assert pump(app) == ["delivered"]
    assert [len(s.requests) for s in sinks] == [1, 2]  # billing was not sent again

    ana.get("/ui/hooks/event", source="shop", event_id="evt_1")
    r = ana.post("/ui/hooks/redeliver", {"source": "shop", "event_id": "evt_1"})
    assert r.status_code == 400 and "redeliver it from one destination" in text(ana.html)
    assert ana.get("/ui/hooks/event", source="shop", event_id="evt_1",
                   destination="nope").status_code == 404
    assert ana.get("/ui/hooks/event", source="shop", event_id="evt_1",
                   destination="Not a name").status_code == 400


def test_each_failed_delivery_is_a_line_of_the_queue_and_its_issue_links_to_it(
        app, ana, shop, sinks):
    """Both destinations refuse an event for good: the queue has a line per delivery, each
    naming its destination; crm's issue links to crm's failed deliveries, and that
    listing (filtered by destination) shows crm's line only; a hostile destination
    filter is a 400 page, never echoed as markup."""
    sinks[0].answer = lambda n, r: 400
    body = json.dumps({"id": "evt_1", "type": "order.paid"}).encode()
    assert deliver(app.test_client(), shop, body, "evt_1") == 202
    assert sorted(pump(app)) == ["failed", "failed"]
    assert ana.get("/ui/", kind="delivery_failed").status_code == 200
    rows = re.findall(r"<tr>.*?</tr>", ana.html, re.S)[1:]
    assert sorted(re.search(r"to (billing|crm)<", r).group(1) for r in rows) == \
        ["billing", "crm"]
    app.extensions["keystore"].gateway.issues.watch()
    assert ana.get("/ui/issues").status_code == 200
    link = ('href="/ui/hooks/deliveries?source=shop&amp;destination=crm&amp;state=failed"')
    assert link in ana.html and "shop/billing" in text(ana.html)
    assert ana.get("/ui/hooks/deliveries", source="shop", destination="crm",
                   state="failed").status_code == 200
    rows = re.findall(r"<tr>.*?</tr>", ana.html, re.S)[1:]
    assert len(rows) == 1 and "<td><code>crm</code></td>" in rows[0]
    assert ana.get("/ui/hooks/deliveries", destination="<b>x</b>").status_code == 400
    assert "<b>x</b>" not in ana.html
