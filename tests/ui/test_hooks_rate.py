"""The Webhooks page and a destination's rate (issue 29, "Rates per destination"), through
Flask's test client on both backends: the source's rate is shown beside its max_in_flight
where its destination is, once set by PATCH /v1/sources/shop as an operator sets it; nothing
is said without one, and a stored form that does not read gives a calm page."""
from __future__ import annotations

import json
import re

import pytest

from .hooks_support import ana, hooks_settings, shop, sink, text

__all__ = ["ana", "shop", "sink"]


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


def patch_rate(app, tokens, url: str, rate) -> None:
    r = app.test_client().patch("/v1/sources/shop", json={
        "destination": {"url": url, "rate": rate}, "max_in_flight": 3},
        headers={"Authorization": f"Bearer {tokens['ana']}"})
    assert r.status_code == 200, r.get_json()


def source_row(html: str) -> str:
    (row,) = [r for r in re.findall(r"<tr>.*?</tr>", html, re.S)
              if text(r).startswith("shop testing ")]
    return text(row)


def test_the_rate_is_shown_beside_max_in_flight_where_the_destination_is(
        app, ana, tokens, shop, sink):
    assert ana.get("/ui/hooks").status_code == 200
    assert "Rate" not in source_row(ana.html)  # none set: nothing new
    for rate, said in (({"per_second": 5}, "Rate: 5 a second, at most 3 at once"),
                       ({"per_minute": 1_000_000}, "Rate: 1,000,000 a minute, at most 3 at once")):
        patch_rate(app, tokens, sink.url, rate)
        assert ana.get("/ui/hooks").status_code == 200
        assert source_row(ana.html).startswith(f"shop testing active {sink.url} {said} "), \
            source_row(ana.html)
    patch_rate(app, tokens, sink.url, None)
    assert ana.get("/ui/hooks").status_code == 200 and "Rate" not in source_row(ana.html)


def test_a_stored_rate_that_does_not_read_gives_a_calm_page(app, ana, tokens, shop):
    ks = app.extensions["keystore"]
    store, clock = ks.gateway.sources.store, ks.gateway.sources.clock
    tenant_id = ks.accounts.principal(tokens["ana"]).tenant_id
    for odd in ({"per_second": 0}, {"per_hour": 5}, "5/s", [5]):
        with store.transaction() as cur:
            source = store.named(tenant_id, "shop", cur)
            options = source.options
            options.setdefault("forward", {})["rate"] = odd
            store.change(cur, source, {"config": json.dumps(options)}, clock())
        assert ana.get("/ui/hooks").status_code == 200, odd
        assert "Rate: its stored form does not read; at most" in source_row(ana.html), odd
