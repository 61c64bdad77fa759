"""The Webhooks section's Resume button (issue 25, item 6), on both backends: a source paused
by its destination's Retry-After shows the button; pressing it ends the pause as POST
/v1/sources/<name>/resume does, and a name that is no source's changes nothing."""
from __future__ import annotations

import pytest

from .conftest import Browser
from .hooks_support import create_source, deliver, hooks_settings, pump, sink
from .support import forms

__all__ = ["sink"]


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


@pytest.fixture
def ana(browser, tokens) -> Browser:
    browser.sign_in(tokens["ana"])
    return browser


def test_a_paused_source_is_resumed_from_the_page(app, ana, operator, tokens, sink):
    sink.answer = lambda n, r: (429, {"Retry-After": "999999999"}) if n == 0 else 200
    shop = create_source(operator, tokens["ana"], sink.url)
    assert deliver(app.test_client(), shop) == 202
    assert pump(app) == ["retry"]
    ana.get("/ui/hooks")
    (form,) = [f for f in forms(ana.html) if f["action"] == "/ui/hooks/resume"]
    assert form["hidden"] == {"csrf_token": ana.csrf, "source": "shop"}
    for bad in ("nope", "Shop", "shop\x00", "shop\r\nX: 1", "a" * 65):
        ana.get("/ui/hooks")
        resp = ana.post("/ui/hooks/resume", {"source": bad})
        assert resp.status_code in (400, 404), bad
        assert "nothing was changed" in ana.html.lower(), bad
    assert operator.get("/v1/sources/shop")[1]["source"]["paused_until"] is not None
    ana.get("/ui/hooks")
    resp = ana.post("/ui/hooks/resume", {"source": "shop"})
    assert resp.status_code == 303 and resp.headers["Location"] == "/ui/hooks"
    assert operator.get("/v1/sources/shop")[1]["source"]["paused_until"] is None
    assert pump(app) == ["delivered"]
    ana.get("/ui/hooks")
    assert not [f for f in forms(ana.html) if f["action"] == "/ui/hooks/resume"]
