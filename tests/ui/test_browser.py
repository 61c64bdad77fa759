"""The operators' page in a real headless Chromium (Debian's /usr/bin/chromium, driven by
Playwright) against a real `keystore serve`, on SQLite and on PostgreSQL.

Playwright, not Selenium: its Python package carries its own driver (no chromedriver to
match to the browser's version), and its locators wait for the page by themselves, so these
tests have no sleeps but the one that lets the idle time pass. It never downloads a browser
here: it launches Debian's. Screenshots go to test-artifacts/ui/ (git-ignored).
"""
from __future__ import annotations

import itertools
import os
import threading
import time
from dataclasses import dataclass

import pytest

from keystore_service.storage import migrate
from tests.support import Api, Server, new_token

from .chromium import ARTIFACTS, chromium, page, sign_in

__all__ = ["chromium", "page"]  # fixtures of this module's tests
IDLE_MINUTES = 0.05  # 3 s: the idle test waits this out for real
_keys = itertools.count()


@dataclass
class Served:
    server: Server
    idle_server: Server  # the same database, signed out after IDLE_MINUTES
    backend: str
    client: str  # tokens
    operator: str

    @property
    def url(self) -> str:
        return self.server.url

    def api(self, token: str | None = None) -> Api:
        return Api(self.url, token or self.client)


def _database(request, tmp_path_factory) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('ui')}/keystore.db"
        migrate.upgrade(url)
        return url
    return request.getfixturevalue("pg_database")("_ui")


@pytest.fixture(scope="module",
                params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request, tmp_path_factory):
    """A real `keystore serve` (2 workers: the session key must agree across them), and one
    with a short idle time on the same database, started side by side; a client token and an
    operator token named "ana" of tenant acme."""
    url = _database(request, tmp_path_factory)
    client = new_token(url, "acme", "client", "acme-n8n")
    operator = new_token(url, "acme", "operator", "ana")
    logs = tmp_path_factory.mktemp("log")
    server = Server(url, workers=2, threads=4, log_path=logs / "server.log")
    idle = Server(url, workers=1, threads=4, env={"KEYSTORE_UI_IDLE_MINUTES": str(IDLE_MINUTES)},
                  log_path=logs / "idle-server.log")
    failed: list = []
    starting = threading.Thread(target=lambda: _start(idle, failed))
    starting.start()
    try:
        server.start()
    finally:
        starting.join()
    try:
        if failed:
            raise failed[0]
        yield Served(server, idle, request.param, client, operator)
    finally:
        for s in (server, idle):
            s.kill()  # test servers: no need to wait out the browser's keep-alive connections


def _start(server: Server, failed: list) -> None:
    try:
        server.start()
    except Exception as exc:  # reported by the fixture, in the test's thread
        failed.append(exc)


def shot(page, served: Served, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{served.backend}-{name}.png"), full_page=True)


def new_key(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{next(_keys)}"


def make_mismatch(served: Served, key: str) -> None:
    api = served.api()
    status, body, _ = api.post("/v1/claim", {"scope": "create_invoice", "key": key,
                                             "payload": {"customer": "acme", "amount": 1250}})
    assert status == 201, body
    status, body, _ = api.post("/v1/complete", {
        "scope": "create_invoice", "key": key, "lease_token": body["lease_token"],
        "state": "succeeded", "result": {"resource_id": "INV-42", "status_code": 201}})
    assert status == 200, body
    status, body, _ = api.post("/v1/claim", {"scope": "create_invoice", "key": key,
                                             "payload": {"customer": "acme", "amount": 1520}})
    assert (status, body["outcome"]) == (422, "fingerprint_mismatch"), body


def open_reviews(served: Served, key: str) -> list:
    status, body, _ = served.api(served.operator).get("/v1/reviews", key=key)
    assert status == 200, body
    return body["reviews"]


def test_an_operator_finds_and_resolves_a_mismatch(served, page):
    """The walk-through of docs/operations.md; its screenshot is this test's
    sqlite-record-mismatch-top.png."""
    from playwright.sync_api import expect
    key = "evt_881"  # the docs' example (each module's database is its own)
    make_mismatch(served, key)
    sign_in(page, served, served.operator)
    row = page.get_by_role("row").filter(has_text=key)
    expect(row).to_contain_text("fingerprint mismatch")
    expect(row).to_contain_text("succeeded")
    shot(page, served, "queue")

    row.get_by_role("link", name=key).click()
    expect(page.get_by_role("heading", name="Needs a decision")).to_be_visible()
    expect(page.locator(".review")).to_contain_text("Refused fingerprint")
    shot(page, served, "record-mismatch")
    page.screenshot(path=str(ARTIFACTS / f"{served.backend}-record-mismatch-top.png"))
    page.get_by_role("button", name="Dismiss").click()
    expect(page.get_by_role("status")).to_have_text("Dismissed: the original stays as it was.")
    expect(page.get_by_role("heading", name="Needs a decision")).to_have_count(0)
    expect(page.locator(".audit li").first).to_contain_text("dismiss by ana")
    shot(page, served, "record-dismissed")
    assert open_reviews(served, key) == []

    page.get_by_role("link", name="Review queue").first.click()
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    expect(page.get_by_role("link", name=key)).to_have_count(0)

    # the resend was a correction after all: expire the record, and the resend gets through
    page.get_by_role("link", name="Search").click()
    page.get_by_label("Scope").fill("create_invoice")
    page.get_by_label("Key").fill(key)
    page.get_by_role("button", name="Search").click()
    page.get_by_role("button", name="Expire record").click()
    expect(page.get_by_role("status")).to_contain_text("Expired: the next claim")
    expect(page.locator(".state-expired")).to_be_visible()
    status, body, _ = served.api().post("/v1/claim", {
        "scope": "create_invoice", "key": key, "payload": {"customer": "acme", "amount": 1520}})
    assert (status, body["outcome"], body["record"]["attempt"]) == (201, "acquired", 1)


def test_an_operator_marks_a_stale_attempt_succeeded(served, page):
    from playwright.sync_api import expect
    key = new_key("contact")
    api = served.api()
    status, body, _ = api.post("/v1/claim", {"scope": "sync_crm", "key": key,
                                             "lease_seconds": 1})
    assert status == 201, body
    api.post("/v1/extend", {"scope": "sync_crm", "key": key, "lease_token": body["lease_token"],
                            "lease_seconds": 1, "checkpoint": "contact_created",
                            "resource_id": "C-9"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until the 1-second lease has run out
        status, body, _ = api.post("/v1/claim", {"scope": "sync_crm", "key": key})
        if body.get("outcome") == "needs_reconciliation":
            break
        time.sleep(0.2)
    assert body["outcome"] == "needs_reconciliation", body

    sign_in(page, served, served.operator)
    page.get_by_role("row").filter(has_text=key).get_by_role("link", name=key).click()
    review = page.locator(".review")
    expect(review).to_contain_text("contact_created")
    expect(review.get_by_label("Resource id")).to_have_value("C-9")  # from the checkpoint
    review.get_by_label("Status code").fill("201")
    review.get_by_label("Body").fill('{"contact": "C-9"}')
    shot(page, served, "record-stale")
    review.get_by_role("button", name="Mark succeeded").click()
    expect(page.get_by_role("status")).to_have_text("Marked succeeded.")
    expect(page.locator(".pairs").first).to_contain_text('"resource_id": "C-9"')
    expect(page.locator(".audit li").first).to_contain_text("mark succeeded by ana")
    status, body, _ = api.get("/v1/keys", scope="sync_crm", key=key)
    assert body["record"]["state"] == "succeeded"
    assert body["record"]["result"] == {"resource_id": "C-9", "status_code": 201,
                                        "body": {"contact": "C-9"}}


def test_a_form_without_its_csrf_token_is_refused(served, page):
    from playwright.sync_api import expect
    key = new_key("evt")
    make_mismatch(served, key)
    sign_in(page, served, served.operator)
    page.goto(f"{served.url}/ui/record?scope=create_invoice&key={key}")
    form = page.locator("form").filter(has=page.get_by_role("button", name="Dismiss"))
    form.locator("input[name=csrf_token]").evaluate("input => input.remove()")
    form.get_by_role("button", name="Dismiss").click()
    expect(page.get_by_role("heading", name="That could not be used")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("security token")
    shot(page, served, "csrf-refused")
    assert len(open_reviews(served, key)) == 1  # nothing changed


def test_a_client_token_cannot_sign_in(served, page):
    from playwright.sync_api import expect
    sign_in(page, served, served.client)
    expect(page.get_by_role("alert")).to_contain_text("That is a client token")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    shot(page, served, "client-token-refused")
    page.get_by_label("Operator token").fill("ks_this-is-not-a-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("That token was not accepted")
    page.goto(served.url + "/ui/stuck")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_idle_sign_out(served, page):
    """On the server with a 3-second idle time (KEYSTORE_UI_IDLE_MINUTES)."""
    from playwright.sync_api import expect
    page.goto(served.idle_server.url + "/ui/")
    page.get_by_label("Operator token").fill(served.operator)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    time.sleep(IDLE_MINUTES * 60 + 0.5)  # the one wait: idle time has to pass for real
    page.get_by_role("link", name="Stuck").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text(
        "You were signed out after 3 s without activity.")
    shot(page, served, "idle-signed-out")
    page.get_by_label("Operator token").fill(served.operator)
    page.get_by_role("button", name="Sign in").click()  # and on to where they were going
    expect(page.get_by_role("heading", name="Stuck operations")).to_be_visible()
