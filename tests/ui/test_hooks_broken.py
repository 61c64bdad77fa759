"""The Webhooks page shows a source no configured key opens as broken (issue 25, item 4),
and every other source, and the page's other views, as usual. Flask's test client, on both
backends, as tests/ui/test_hooks.py."""
from __future__ import annotations

import re

import pytest
from cryptography.fernet import Fernet

from keystore_service.app import create_app
from keystore_service.settings import Settings
from tests.support import Http

from .conftest import Browser
from .hooks_support import KEY, create_source, deliver, hooks_settings, sink, text

__all__ = ["sink"]
OTHER = Fernet.generate_key().decode()


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


def app_with(database_url: str, keys: str, clock):
    return create_app(Settings(database_url=database_url, secret_key=keys,
                               token_cache_seconds=0), clock)


def test_a_source_no_key_opens_is_shown_broken_and_the_others_as_usual(
        app, database_url, operator, tokens, sink, clock):
    old = create_source(operator, tokens["ana"], sink.url, name="old")  # sealed with KEY
    assert deliver(app.test_client(), old, event_id="evt_old") == 202
    rotating = app_with(database_url, f"{OTHER},{KEY}", clock)
    create_source(Http(rotating.test_client(), tokens["ana"]), tokens["ana"], sink.url,
                  name="fine")
    after = app_with(database_url, OTHER, clock)  # KEY dropped before "old" was sealed again
    try:
        browser = Browser(after.test_client())
        browser.sign_in(tokens["ana"])
        assert browser.get("/ui/hooks").status_code == 200
        rows = {text(r).split()[0]: text(r) for r in
                re.findall(r"<tr>.*?</tr>", browser.html, re.S) if "testing" in r}
        assert rows["old"].startswith(f"old testing broken {sink.url} 1 ")
        assert rows["fine"].startswith(f"fine testing active {sink.url} 0 ")
        assert "KEYSTORE_SECRET_KEY" in text(browser.html)  # what to fix, said once
        assert 'class="state state-source-broken"' in browser.html
        for path in ("/ui/hooks/deliveries?source=old",
                     "/ui/hooks/event?source=old&event_id=evt_old"):
            assert browser.get(path).status_code == 200, path
    finally:
        for a in (rotating, after):
            a.extensions["keystore"].database.engine.dispose()
