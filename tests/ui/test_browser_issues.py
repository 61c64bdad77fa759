"""The Issues section in a real headless Chromium against a real `keystore serve` (2 workers,
each with its relay and the alerts' loop beside it): a destination that keeps answering 503
leaves an event queued past its source's backlog threshold, the watchers open one backlog
issue, the Slack-compatible channel hears it once from the server itself, and an operator
acknowledges the issue and sends a test notice on the page. Screenshots go to
test-artifacts/ui/."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from pathlib import Path

import pytest
import requests

from keystore_service.storage import migrate
from keystore_service.storage.accounts import Accounts
from keystore_service.storage.db import Database, create
from tests.gateway.support import KEY, Sink
from tests.support import T0, Api, Server

SECRET = "generic-signing-secret"
WAIT_S = 30  # the watchers look every second here; a busy 2-core machine is slower
CHROMIUM = os.environ.get("KEYSTORE_TEST_CHROMIUM", "/usr/bin/chromium")
# As the other browser tests: root in a sandbox with only loopback
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"


@pytest.fixture(scope="module")
def page():
    """A page of a Chromium of this module's own (Debian's, driven by Playwright)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Debian's Chromium is required at {CHROMIUM}", pytrace=False)
    from playwright.sync_api import expect, sync_playwright
    expect.set_options(timeout=20_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                    timeout=60_000)
        context = browser.new_context(viewport={"width": 1200, "height": 860})
        yield context.new_page()
        browser.close()


def operator_token(url: str) -> str:
    database = Database(create(url, pool_size=1))
    try:
        accounts = Accounts(database)
        accounts.create_tenant("acme", T0)
        return accounts.create_token("acme", "operator", "ana", T0)
    finally:
        database.engine.dispose()


@pytest.fixture(scope="module",
                params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request, tmp_path_factory):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('issues')}/keystore.db"
        migrate.upgrade(url)
    else:
        url = request.getfixturevalue("pg_database")("_issues")
    operator = operator_token(url)
    server = Server(url, workers=2, threads=4, env={"KEYSTORE_SECRET_KEY": KEY,
                                                   "KEYSTORE_ALERT_WATCH_SECONDS": "1"},
                    log_path=tmp_path_factory.mktemp("log") / "server.log")
    server.start()
    try:
        yield request.param, server, operator
    finally:
        server.kill()


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_an_issue_is_told_once_and_acknowledged_on_the_page(served, page):
    from playwright.sync_api import expect
    backend, server, operator = served
    api = Api(server.url, operator)
    down, slack = Sink(answer=lambda n, r: 503), Sink()
    try:
        status, body, _ = api.post("/v1/alert-channels", {
            "name": "ops-slack", "kind": "slack", "url": slack.url + "/T0/B0/x"})
        assert status == 201, body
        status, body, _ = api.post("/v1/sources", {
            "name": "invoices", "provider": "generic", "secrets": [SECRET],
            "signature": {"header": "X-Signature", "algorithm": "sha256", "encoding": "hex",
                          "prefix": "sha256="},
            "event_id": {"header": "X-Event-Id"}, "destination": {"url": down.url},
            "backlog_alert_seconds": 0, "alert_after_seconds": 3600})
        assert status == 201, body
        raw = json.dumps({"id": "inv_1"}).encode()
        assert requests.post(body["source"]["ingest_url"], data=raw, timeout=10, headers={
            "X-Event-Id": "inv_1", "Content-Type": "application/json",
            "X-Signature": "sha256=" + hmac.new(SECRET.encode(), raw,
                                                hashlib.sha256).hexdigest()}).status_code == 202
        wait_for(lambda: slack.requests, "the server's watchers open the issue and tell Slack")
        time.sleep(2)  # both workers' watchers look again: still one issue, one notice
        [told] = slack.requests
        assert json.loads(told["body"])["text"].startswith("Issue opened: backlog invoices")
        status, body, _ = api.get("/v1/issues")
        [issue] = [i for i in body["issues"] if i["kind"] == "backlog"]

        page.goto(server.url + "/ui/")
        page.get_by_label("Operator token").fill(operator)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("link", name="Issues").click()
        expect(page.get_by_role("heading", name="Issues")).to_be_visible()
        row = page.locator(f"#issue-{issue['id']}")
        expect(row).to_contain_text("its oldest queued event waits")
        expect(row.get_by_role("link", name="the queued deliveries of invoices")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / f"{backend}-issues-open.png"), full_page=True)
        row.get_by_role("button", name=f"Acknowledge issue {issue['id']}").click()
        expect(page.get_by_role("status")).to_contain_text("Acknowledged")
        expect(page.locator(f"#issue-{issue['id']}")).to_contain_text("by ana")
        status, body, _ = api.get("/v1/issues", state="acknowledged")
        assert [i["id"] for i in body["issues"]] == [issue["id"]]
        page.get_by_role("button", name="Send a test notice to ops-slack").click()
        expect(page.get_by_role("status")).to_contain_text("A test notice is queued")
        wait_for(lambda: len(slack.requests) == 2, "the test notice arrives")
        assert json.loads(slack.requests[1]["body"])["text"].startswith("Test notice")
        page.screenshot(path=str(ARTIFACTS / f"{backend}-issues-acknowledged.png"),
                        full_page=True)
    finally:
        down.close()
        slack.close()
