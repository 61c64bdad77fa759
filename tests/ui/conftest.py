"""Fixtures of the operators' page tests: the app on a test clock with a test-client
"browser" for the fast tests (tests/ui/test_rules.py), tokens with names (the audit trail
records them), and helpers to make review items through the real HTTP API."""
from __future__ import annotations

import re
from typing import Optional

import pytest

from keystore_service.app import create_app
from keystore_service.settings import Settings
from tests.support import Http, new_token

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


class Browser:
    """Flask's test client used like a browser: it keeps the cookie, and posts forms with
    the CSRF token of the last page it saw (unless told not to)."""

    def __init__(self, client, base_url: str = "http://localhost"):
        self.client, self.base_url = client, base_url
        self.html = ""

    def get(self, path: str, **params):
        resp = self.client.get(path, query_string=params or None, base_url=self.base_url)
        self.html = resp.get_data(as_text=True)
        return resp

    @property
    def csrf(self) -> Optional[str]:
        found = CSRF.search(self.html)
        return found.group(1) if found else None

    def post(self, path: str, data: Optional[dict] = None, *, csrf: bool = True):
        form = dict(data or {})
        if csrf:
            form.setdefault("csrf_token", self.csrf)
        resp = self.client.post(path, data=form, base_url=self.base_url)
        self.html = resp.get_data(as_text=True)
        return resp

    def sign_in(self, token: str):
        self.get("/ui/signin")
        return self.post("/ui/signin", {"token": token})


@pytest.fixture
def ui_settings(request, database_url) -> Settings:
    """The app's settings; a test may change some with
    `@pytest.mark.parametrize("ui_settings", [{...}], indirect=True)`."""
    return Settings(database_url=database_url, **getattr(request, "param", {}))


@pytest.fixture
def app(ui_settings, clock):
    application = create_app(ui_settings, clock)
    yield application
    application.extensions["keystore"].database.engine.dispose()


@pytest.fixture
def tokens(database_url, app) -> dict:
    return {"acme": new_token(database_url, "acme", "client", "acme-n8n"),
            "ana": new_token(database_url, "acme", "operator", "ana"),
            "globex": new_token(database_url, "globex", "client", "globex-zapier"),
            "gus": new_token(database_url, "globex", "operator", "gus")}


@pytest.fixture
def acme(app, tokens) -> Http:
    """The acme tenant's client, over the HTTP API."""
    return Http(app.test_client(), tokens["acme"])


@pytest.fixture
def globex(app, tokens) -> Http:
    return Http(app.test_client(), tokens["globex"])


@pytest.fixture
def operator(app, tokens) -> Http:
    """acme's operator "ana", over the HTTP API (to check what the page did)."""
    return Http(app.test_client(), tokens["ana"])


@pytest.fixture
def browser(app) -> Browser:
    return Browser(app.test_client())


def mismatch(http: Http, scope: str, key: str, amount: int = 100) -> dict:
    """Claim, complete (INV-<key>), then claim again with another payload: 422, a review."""
    status, body, _ = http.post("/v1/claim", {"scope": scope, "key": key,
                                              "payload": {"amount": amount}})
    assert status == 201, body
    status, body, _ = http.post("/v1/complete", {
        "scope": scope, "key": key, "lease_token": body["lease_token"], "state": "succeeded",
        "result": {"resource_id": f"INV-{key}", "status_code": 201}})
    assert status == 200, body
    status, body, _ = http.post("/v1/claim", {"scope": scope, "key": key,
                                              "payload": {"amount": amount + 1}})
    assert status == 422, body
    return body


def stale(http: Http, clock, scope: str, key: str) -> str:
    """A claim whose lease runs out, then a repeat: 409 needs_reconciliation, a review.
    Returns the first attempt's lease token."""
    status, body, _ = http.post("/v1/claim", {"scope": scope, "key": key, "lease_seconds": 10,
                                              "payload": {"n": 1}})
    assert status == 201, body
    lease = body["lease_token"]
    http.post("/v1/extend", {"scope": scope, "key": key, "lease_token": lease,
                             "lease_seconds": 10, "checkpoint": "invoice_created",
                             "resource_id": f"INV-{key}"})
    clock.advance(11)
    status, body, _ = http.post("/v1/claim", {"scope": scope, "key": key, "payload": {"n": 1}})
    assert (status, body["outcome"]) == (409, "needs_reconciliation"), body
    return lease
