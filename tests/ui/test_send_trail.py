"""The record page's outbound trail (issue 28), both backends: a send's request (method, path,
connection; its sealed headers and body only by size), each attempt with its classification,
the checks' runs with the destination's answers escaped and cut at 512 characters, and a
check's resolution. Header values and sealed bodies never appear. The rows are written as the
sender and the checker write them, straight into the tables of a real database."""
from __future__ import annotations

import json

import pytest
from markupsafe import escape
from sqlalchemy import insert

from keystore_service.domain.sends import Class, SendState, Verdict
from keystore_service.storage.send_tables import (
    connections,
    record_checks,
    send_attempts,
    sends,
)
from tests.gateway.support import KEY

from .support import record_url

SCOPE = "invoices"
SECRET = "Bearer sk_live_do_not_show_9f8e7d"
BODY = {"customer": "acme", "card": "4242-secret-body-4242"}
SCRIPT = '<script>alert("x")</script>'
pytestmark = pytest.mark.parametrize(
    "ui_settings", [{"secret_key": KEY, "token_cache_seconds": 0}], indirect=True)


def _seal(app, value) -> str:
    return app.extensions["keystore"].gateway.sealer.seal(value)


def _write(app, rows: list[tuple]) -> list[int]:
    engine = app.extensions["keystore"].database.engine
    with engine.begin() as conn:
        return [conn.execute(insert(table).values(**values)).inserted_primary_key[0]
                for table, values in rows]


def connection(app, tenant_id: int, name: str = "billing") -> int:
    (cid,) = _write(app, [(connections, dict(
        tenant_id=tenant_id, name=name, base_url="http://127.0.0.1:9/api",
        sealed=_seal(app, {"Authorization": SECRET}),
        header_names=json.dumps(["Authorization"]), idempotency_header=None,
        timeout_seconds=10, retry_window_seconds=3600, max_in_flight=4, rate=None,
        check_spec=json.dumps({"method": "GET", "path": "/invoices?reference={reference}",
                               "found": {"pointer": "/items/0"}, "absent": "/items",
                               "resource_id": "/items/0/id"}),
        created_at=1, updated_at=1))])
    return cid


def record_of(app, acme, key: str):
    assert acme.post("/v1/claim", {"scope": SCOPE, "key": key, "payload": BODY})[0] == 201
    ks = app.extensions["keystore"]
    tenant_id = ks.accounts.principal(acme.token).tenant_id
    return tenant_id, ks.service.records.get(tenant_id, SCOPE, key)


def a_send(app, record, cid: int, state: SendState, sealed: bool, at: int) -> int:
    (sid,) = _write(app, [(sends, dict(
        tenant_id=record.tenant_id, connection_id=cid, connection_name="billing",
        record_id=record.id, incarnation=record.incarnation, reference=f"{SCOPE}:{record.key}",
        method="POST", path="/invoices", resource_id_pointer="/id",
        sealed=_seal(app, {"headers": {"X-Extra": SECRET}, "json": BODY}) if sealed else None,
        state=state.value, attempts=2, unknown=1, check_tries=1, created_at=at,
        window_end=at + 3600_000_000, next_attempt_at=at,
        settled_at=None if state == SendState.QUEUED else at + 2_000_000,
        last_error=None))])
    return sid


def test_the_trail_shows_request_attempts_and_checks_never_secrets(app, browser, acme, tokens,
                                                                   clock):
    tenant_id, record = record_of(app, acme, "INV-1")
    cid = connection(app, tenant_id)
    now = clock()
    sid = a_send(app, record, cid, SendState.SUCCEEDED, sealed=False, at=now)
    long_answer = '{"error": "' + "x" * 600 + 'TAIL-NOT-SHOWN"}'
    _write(app, [
        (send_attempts, dict(send_id=sid, at=now, duration_ms=10_002, status_code=None,
                             error="timed out after the request went out",
                             **{"class": Class.UNKNOWN.value}, answer=None)),
        (send_attempts, dict(send_id=sid, at=now + 1, duration_ms=40, status_code=502,
                             error=None, **{"class": Class.UNKNOWN.value},
                             answer=long_answer)),
        (record_checks, dict(tenant_id=tenant_id, record_id=record.id,
                             incarnation=record.incarnation, at=now + 2, status_code=200,
                             error=None, verdict=Verdict.FOUND.value, resource_id="in_77",
                             answer=json.dumps({"items": [{"id": "in_77", "memo": SCRIPT}]}))),
    ])
    browser.sign_in(tokens["ana"])
    assert browser.get(record_url("INV-1", SCOPE)).status_code == 200
    html = browser.html
    assert "Send and checks" in html and "<code>POST /invoices</code>" in html
    assert "billing" in html and f"{SCOPE}:INV-1" in html
    assert "dropped when the send settled" in html
    assert "timed out after the request went out" in html and "10002 ms" in html
    assert html.count('class="state class-unknown"') == 2
    assert "TAIL-NOT-SHOWN" not in html  # cut at 512 characters
    assert str(escape(long_answer[:512])) + " …" in html
    assert "What the check saw" in html and "<code>in_77</code>" in html
    assert SCRIPT not in html and "&lt;script&gt;" in html  # escaped, never markup
    assert SECRET not in html and "sk_live" not in html and "4242-secret" not in html


def test_a_queued_send_shows_its_sealed_request_only_by_size(app, browser, acme, tokens, clock):
    tenant_id, record = record_of(app, acme, "INV-2")
    cid = connection(app, tenant_id)
    a_send(app, record, cid, SendState.QUEUED, sealed=True, at=clock())
    browser.sign_in(tokens["ana"])
    browser.get(record_url("INV-2", SCOPE))
    html = browser.html
    assert "sealed, " in html and " bytes" in html and "never shown" in html
    assert "No request was made yet" in html and "Next attempt" in html
    assert SECRET not in html and "4242-secret" not in html and "X-Extra" not in html


def test_a_plain_record_has_no_trail_and_another_tenant_sees_none(app, browser, acme, globex,
                                                                  tokens, clock):
    tenant_id, record = record_of(app, acme, "INV-3")
    a_send(app, record, connection(app, tenant_id), SendState.QUEUED, sealed=True, at=clock())
    assert acme.post("/v1/claim", {"scope": SCOPE, "key": "plain", "payload": {}})[0] == 201
    browser.sign_in(tokens["ana"])
    browser.get(record_url("plain", SCOPE))
    assert "Send and checks" not in browser.html
    assert globex.post("/v1/claim", {"scope": SCOPE, "key": "INV-3", "payload": BODY})[0] == 201
    browser.post("/ui/signout")
    browser.sign_in(tokens["gus"])
    browser.get(record_url("INV-3", SCOPE))  # globex's own INV-3: acme's send is not shown
    assert "Send and checks" not in browser.html


def test_the_connections_page_lists_checks_and_load_never_header_values(app, browser, acme,
                                                                        tokens, clock):
    ks = app.extensions["keystore"]
    tenant_id, record = record_of(app, acme, "INV-4")
    made = ks.gateway.connections.create(tenant_id, {
        "name": "ledger", "base_url": "http://127.0.0.1:9/v2",
        "headers": {"Authorization": SECRET, "X-Account": "acct-secret-77"},
        "check": {"method": "GET", "path": "/invoices?reference={reference}",
                  "found": {"pointer": "/data/0"}, "absent": "/data"}})
    a_send(app, record, made.id, SendState.QUEUED, sealed=True, at=clock())
    _, other = record_of(app, acme, "INV-5")
    a_send(app, other, made.id, SendState.SENDING, sealed=True, at=clock())
    _, done = record_of(app, acme, "INV-6")
    a_send(app, done, made.id, SendState.SUCCEEDED, sealed=False, at=clock())
    globex_id = ks.accounts.principal(tokens["globex"]).tenant_id
    ks.gateway.connections.create(globex_id, {"name": "globex-erp",
                                              "base_url": "http://127.0.0.1:9/erp"})
    browser.sign_in(tokens["ana"])
    assert browser.get("/ui/connections").status_code == 200
    html = browser.html
    assert 'href="/ui/connections" aria-current="page"' in html
    row = html.split('data-connection="ledger"', 1)[1].split("</tr>", 1)[0]
    assert "http://127.0.0.1:9/v2" in row and "<code>Authorization</code>" in row
    assert "<code>X-Account</code>" in row
    assert "GET /invoices?reference={reference}" in row and "/data/0" in row
    assert '<td class="num">1</td>\n    <td class="num">1</td>' in row  # in flight, queued
    assert "nothing: unknown outcomes go to the check" in row
    assert SECRET not in html and "acct-secret-77" not in html
    assert "globex-erp" not in html  # another tenant's


def test_a_plain_claim_checked_by_its_scopes_settlement_shows_the_checks(app, browser, acme,
                                                                         tokens, clock):
    tenant_id, record = record_of(app, acme, "INV-7")
    _write(app, [(record_checks, dict(
        tenant_id=tenant_id, record_id=record.id, incarnation=record.incarnation, at=clock(),
        status_code=503, error=None, verdict=Verdict.UNCLEAR.value, resource_id=None,
        answer='{"error": "maintenance"}'))])
    browser.sign_in(tokens["ana"])
    browser.get(record_url("INV-7", SCOPE))
    html = browser.html
    assert "The destination&#39;s checks" in html and "Send and checks" not in html
    assert 'class="state verdict-unclear"' in html and "maintenance" in html
    assert "Send of incarnation" not in html
