"""A send's trail in a real headless Chromium (issue 28), against a real `keystore serve` whose
relay makes the sends to the scripted downstream API on 127.0.0.1, on SQLite and on
PostgreSQL: an operator opens the record of a send whose answer was lost and that the
connection's check settled, sees the unknown attempt, what the check saw and the resolution,
and follows the connection's link to the Connections page. Nothing the browser shows holds a
header value. Screenshots go to test-artifacts/ui/."""
from __future__ import annotations

import pytest

from keystore_service.storage import migrate
from tests.gateway.support import KEY
from tests.support import Api, Server, new_token
from tests.support.downstream import Downstream, drop

from .chromium import ARTIFACTS, chromium, page, sign_in

__all__ = ["chromium", "page"]  # fixtures of this module's tests
SECRET = "Bearer sk_live_browser_never_shown_77"
CHECK = {"method": "GET", "path": "/invoices?reference={reference}",
         "found": {"pointer": "/data/0"}, "resource_id": "/data/0/id", "absent": "/data"}
SETTLED_SECONDS = 30  # the relay's sender and the check, on a loaded 2-core machine


@pytest.fixture(scope="module",
                params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request, tmp_path_factory):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('ui-sends')}/keystore.db"
        migrate.upgrade(url)
    else:
        url = request.getfixturevalue("pg_database")("_ui_sends")
    server = Server(url, workers=1, threads=4, env={"KEYSTORE_SECRET_KEY": KEY},
                    log_path=tmp_path_factory.mktemp("log") / "server.log",
                    token=new_token(url, "acme", "client", "acme-n8n"),
                    operator_token=new_token(url, "acme", "operator", "ana"))
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def api():
    with Downstream() as d:
        yield d


def test_an_operator_reads_a_send_the_check_settled(served, api, page):
    from playwright.sync_api import expect
    operator, client = Api(served.url, served.operator_token), Api(served.url, served.token)
    status, body, _ = operator.post("/v1/connections", {
        "name": "accounts", "base_url": f"{api.url}/v1", "headers": {"Authorization": SECRET},
        "timeout_seconds": 5, "check": CHECK})
    assert status == 201, body
    key, order = "acme|2026-0043", {"customer": "acme", "number": "2026-0043", "total": 1250}
    api.script(drop(), key=f"book_invoice:{key}")  # created, then the answer is lost
    status, body, _ = client.post("/v1/send", {
        "scope": "book_invoice", "key": key, "connection": "accounts", "payload": order,
        "wait_seconds": SETTLED_SECONDS, "resource_id_pointer": "/id",
        "request": {"method": "POST", "path": "/invoices",
                    "json": {**order, "reference": f"book_invoice:{key}"}}})
    assert (status, body["outcome"], body["result"]["resource_id"]) == (201, "sent", "in_1"), body
    assert api.created() == 1 and api.requests() == 1

    sign_in(page, served, served.operator_token)
    page.goto(f"{served.url}/ui/record?scope=book_invoice&key={key.replace('|', '%7C')}")
    trail = page.locator('section[aria-labelledby="send-h"]')
    expect(trail.get_by_role("heading", name="Send and checks")).to_be_visible()
    expect(trail).to_contain_text("POST /invoices")
    expect(trail).to_contain_text("dropped when the send settled")
    expect(trail.locator(".send-attempts tbody tr")).to_have_count(1)
    expect(trail.locator(".send-attempts")).to_contain_text("unknown")
    expect(trail.locator(".record-checks")).to_contain_text("found")
    expect(trail.locator(".record-checks")).to_contain_text("in_1")
    expect(trail.locator(".resolutions")).to_contain_text("settled by check by check")
    trail.screenshot(path=str(ARTIFACTS / f"{served.backend}-record-send-trail.png"))
    assert "sk_live" not in page.content()

    trail.get_by_role("link", name="accounts").click()
    expect(page.get_by_role("heading", name="Connections")).to_be_visible()
    row = page.locator('tr[data-connection="accounts"]')
    expect(row).to_contain_text("Authorization")
    expect(row).to_contain_text("GET /invoices?reference={reference}")
    assert "sk_live" not in page.content()
    page.screenshot(path=str(ARTIFACTS / f"{served.backend}-connections.png"), full_page=True)
