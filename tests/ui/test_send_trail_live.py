"""The record page's trail of real sends (issue 28), both backends: POST /v1/send through the
API, the sender driven by hand (take and run, as one round of its loop) against the scripted
downstream API on 127.0.0.1. A lost answer settled by the connection's check shows the unknown
attempt, what the check saw and `settled by check`; a 500 with no check to ask shows the
send_unknown review; a queued send shows its sealed request only by size. The connection's
and the request's header values never appear, nor a queued send's body, and the API's
answer is escaped."""
from __future__ import annotations

import pytest

from tests.gateway.support import KEY
from tests.support.downstream import Downstream, answer, drop

from .support import record_url

SCOPE = "invoices"
SECRET = "Bearer sk_live_never_on_the_page_3f9a"
OWN_HEADER = "per-request-secret-61c0"
SCRIPT = '<script>alert("trail")</script>'
CHECK = {"method": "GET", "path": "/invoices?reference={reference}",
         "found": {"pointer": "/data/0"}, "resource_id": "/data/0/id", "absent": "/data"}
HOLDER = "ui-test-sender"
pytestmark = pytest.mark.parametrize(
    "ui_settings", [{"secret_key": KEY, "token_cache_seconds": 0}], indirect=True)


@pytest.fixture
def api():
    with Downstream() as d:
        yield d


def connect(operator, api, name: str, check=None) -> None:
    body = {"name": name, "base_url": f"{api.url}/v1", "headers": {"Authorization": SECRET},
            "timeout_seconds": 2, **({"check": check} if check else {})}
    status, made, _ = operator.post("/v1/connections", body)
    assert status == 201, made


def send(acme, connection: str, key: str, memo: str = "lunch") -> dict:
    status, body, _ = acme.post("/v1/send", {
        "scope": SCOPE, "key": key, "connection": connection, "wait_seconds": 0,
        "payload": {"key": key},
        "request": {"method": "POST", "path": "/invoices", "headers": {"X-Own": OWN_HEADER},
                    "json": {"reference": f"{SCOPE}:{key}", "memo": memo,
                             "card": "4242-body-secret"}},
        "resource_id_pointer": "/id"})
    assert (status, body["outcome"]) == (202, "accepted"), body
    return body


def pump(app, rounds: int = 6) -> list:
    """Rounds of the sender until nothing is due (a check runs in the round after)."""
    sender, out = app.extensions["keystore"].gateway.sender, []
    for _ in range(rounds):
        taken = sender.take(HOLDER, 8)
        if not taken:
            break
        out += [sender.run(job) for job in taken]
    return out


def page(browser, tokens, key: str) -> str:
    browser.sign_in(tokens["ana"])
    assert browser.get(record_url(key, SCOPE)).status_code == 200
    html = browser.html
    assert SECRET not in html and "sk_live" not in html and OWN_HEADER not in html
    return html


def test_a_lost_answer_settled_by_the_check(app, browser, acme, operator, tokens, api):
    connect(operator, api, "ledger", CHECK)
    api.script(drop(), key=f"{SCOPE}:INV-1")  # created, then the answer is lost
    send(acme, "ledger", "INV-1", memo=SCRIPT)
    pump(app)
    assert api.created() == 1 and api.requests() == 1
    html = page(browser, tokens, "INV-1")
    trail = html.split('id="send-h"', 1)[1].split('id="attempts-h"', 1)[0]
    assert "<code>POST /invoices</code>" in trail and "ledger" in trail
    assert "dropped when the send settled" in trail
    assert 'class="state class-unknown"' in trail
    assert "What the check saw" in trail and 'class="state verdict-found"' in trail
    assert "<code>in_1</code>" in trail
    assert "settled by check" in trail and "by <strong>check</strong>" in trail
    assert SCRIPT not in html and "&lt;script&gt;" in html  # the API's answer, escaped


def test_an_unknown_outcome_without_a_check_waits_for_a_person(app, browser, acme, operator,
                                                              tokens, api):
    connect(operator, api, "plain")
    api.script(answer(500), key=f"{SCOPE}:INV-2")
    send(acme, "plain", "INV-2")
    pump(app)
    assert api.requests() == 1  # never a blind retry
    html = page(browser, tokens, "INV-2")
    assert "send unknown" in html and "has no check to ask" in html
    assert "<code>invoices:INV-2</code>" in html
    assert 'class="state class-unknown"' in html and "Mark succeeded" in html
    app.extensions["keystore"].gateway.issues.watch()  # the issue of a send that waits
    browser.get("/ui/issues")
    assert "send_unresolved" in browser.html and "<code>plain</code>" in browser.html
    assert 'href="/ui/?kind=send_unknown">the send_unknown reviews (connection plain)' \
        in browser.html


def test_a_queued_send_shows_no_body(app, browser, acme, operator, tokens, api):
    connect(operator, api, "later")
    send(acme, "later", "INV-3")
    html = page(browser, tokens, "INV-3")
    assert "sealed, " in html and "never shown" in html and "No request was made yet" in html
    assert "4242-body-secret" not in html and "X-Own" not in html
    assert api.requests() == 0
