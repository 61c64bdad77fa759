"""Helpers of the Webhooks section's tests: the gateway's test provider and sink (from
tests/gateway/support.py), sources made through the API, deliveries through the ingest URL,
forwarding driven by hand (Forwarding.take / forward / settle, as one relay round), a page's
text, and the fixtures: the sink, acme's source "shop" and its operator "ana" signed in."""
from __future__ import annotations

import json
import re

import pytest

from keystore_service.settings import Settings
from tests.gateway.support import KEY, Sink, create_source, register, signed
from tests.ui.conftest import Browser

__all__ = ["BODY", "Sink", "create_source", "deliver", "pump", "delivery", "hooks_settings",
           "text", "sink", "shop", "ana"]
BODY = json.dumps({"id": "evt_1", "amount": 1250}).encode()
HOLDER = "ui-test-relay"


def hooks_settings(database_url: str) -> Settings:
    """The page's app with the gateway's key (sources' secrets are sealed with it)."""
    register()  # the `testing` provider (X-Test-Signature, X-Test-Id)
    return Settings(database_url=database_url, secret_key=KEY, token_cache_seconds=0)


def deliver(client, source: dict, body: bytes = BODY, event_id: str = "evt_1") -> int:
    """A signed delivery to the source's ingest URL; its status."""
    path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
    return client.post(path, data=body, headers=signed(body, event_id)).status_code


def pump(app, limit: int = 16) -> list:
    """Take what is due and forward it, as one relay round does; the outcomes."""
    forwarding = app.extensions["keystore"].gateway.forwarding
    out = [forwarding.settle(job, HOLDER, forwarding.forward(job))
           for job in forwarding.take(HOLDER, limit)]
    return [o.value if o else None for o in out]


def delivery(http, event_id: str = "evt_1", source: str = "shop") -> dict:
    status, body, _ = http.get("/v1/deliveries", event_id=event_id, source=source)
    assert status == 200, body
    (found,) = body["deliveries"]
    return found


@pytest.fixture
def sink():
    s = Sink()
    yield s
    s.close()


@pytest.fixture
def shop(operator, tokens, sink) -> dict:
    """acme's source "shop" (the `testing` provider) forwarding to the sink."""
    return create_source(operator, tokens["ana"], sink.url)


@pytest.fixture
def ana(browser, tokens) -> Browser:
    browser.sign_in(tokens["ana"])
    return browser


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def patch_ordering(app, tokens, url: str, given) -> None:
    """PATCH /v1/sources/shop's destination with `given` as its ordering (None: none)."""
    r = app.test_client().patch("/v1/sources/shop", json={"destination": {
        "url": url, "ordering": given}}, headers={"Authorization": f"Bearer {tokens['ana']}"})
    assert r.status_code == 200, r.get_json()
