"""The documentation works: each platform page carries its snippet exactly as shipped (so
what a user pastes from the docs is what the snippet tests ran), every Python block parses,
and the recipes' code runs against the real service with the effect sink standing in for the
billing API."""
from __future__ import annotations

import ast
import time

import pytest

from tests.support import free_port

from .conftest import REPO
from .support import code_blocks

DOCS = REPO / "docs"
SNIPPETS = REPO / "clients" / "snippets"
PAGES = {"n8n-code.md": ["n8n-code-node.js"], "zapier-code.md": ["zapier-code.js",
                                                                  "zapier-code.py"],
         "shell.md": ["keystore.sh"]}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_platform_pages_carry_their_snippets_verbatim(page):
    text = (DOCS / "platforms" / page).read_text()
    for snippet in PAGES[page]:
        assert (SNIPPETS / snippet).read_text() in text, f"{page} is out of date: {snippet}"


def test_the_zapier_python_snippet_runs_on_zapiers_python_3_7():
    ast.parse((SNIPPETS / "zapier-code.py").read_text(), feature_version=(3, 7))


@pytest.mark.parametrize("page", ["python-client.md", "recipes.md"])
def test_python_blocks_parse(page):
    blocks = code_blocks(DOCS / page, "python")
    assert blocks
    for block in blocks:
        ast.parse(block)


def test_the_python_client_page_runs_as_written(service, monkeypatch, capsys):
    """Every Python block of docs/python-client.md runs as the page says: in order, in one
    session, with KEYSTORE_URL and KEYSTORE_TOKEN set, against the real service. Its
    stand-ins (mailer, billing, crm, alert) print what they do, so the output shows which
    side effects ran: each once."""
    monkeypatch.setenv("KEYSTORE_URL", service.url)
    monkeypatch.setenv("KEYSTORE_TOKEN", service.token)
    blocks = code_blocks(DOCS / "python-client.md", "python")
    assert blocks
    ns: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"python-client.md#{i}", "exec"), ns)
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "mail sent: Hours of acme in 2026-W48", "{'message_id': 'msg-1'}",
        "{'message_id': 'msg-1'}",  # the repeat sent nothing
        "invoice created for evt_1Q2w3E with key create_invoice:evt_1Q2w3E", "INV-42",
        "CRM updated: ann@example.com", "CRM updated: ann@example.org",  # once per version
        "invoicing order 1041", "invoicing order 1042",
        "ALERT: event evt_1Q2w3E changed: "
        + ns["ks"].lookup("create_invoice", "evt_1Q2w3E").fingerprint,
    ]
    assert ns["once_only"].retry.tries == 1 and ns["patient"].retry.tries == 6
    derive_key = ns["derive_key"]
    assert derive_key("acme", "2026-W48") == "acme|2026-W48"
    assert derive_key("acme", ns["date"](2026, 11, 30), 42) == "acme|2026-11-30|42"
    for r in ns["results"]:
        assert ns["ks"].lookup("orders", r.key).state == "succeeded"


def test_the_recipes_run(service, sink, scope, monkeypatch, caplog):
    monkeypatch.setenv("KEYSTORE_URL", service.url)
    monkeypatch.setenv("KEYSTORE_TOKEN", service.token)
    blocks = code_blocks(DOCS / "recipes.md", "python")
    ns: dict = {}
    exec(compile(blocks[0], "recipes.md#setup", "exec"), ns)
    ns["BILLING_URL"] = f"{sink.url}/{scope}"  # the billing API is the effect sink here
    for i, block in enumerate(blocks[1:], 1):
        exec(compile(block, f"recipes.md#{i}", "exec"), ns)

    # 1. inbound dedupe: by event id, and derived from the business fields without one
    event = {"id": f"evt-{scope}", "project": "acme", "hours": 3}
    first, again = ns["handle_time_entry"](event), ns["handle_time_entry"](event)
    assert first == {"line_item": f"{scope}/line-items-1", "duplicate": False}
    assert again == {"line_item": f"{scope}/line-items-1", "duplicate": True}
    no_id = {"project": "acme", "entry_date": "2026-11-30", "person": scope, "hours": 2}
    once, twice = ns["handle_time_entry"](no_id), ns["handle_time_entry"](dict(no_id))
    assert once["line_item"] == twice["line_item"] and twice["duplicate"]
    assert sink.count(f"{scope}/line-items") == 2

    # 2. outbound create with the downstream's idempotency key; a 503 releases the attempt
    order = {"customer": "acme", "number": "2026-0042", "total": 1250}
    sink.fail_next(f"{scope}/invoices", 1, status=503)
    with pytest.raises(ns["BillingBusy"]):
        ns["create_invoice"](order)
    assert ns["create_invoice"](order) == ns["create_invoice"](order) == f"{scope}/invoices-1"
    assert sink.items(f"{scope}/invoices")[0]["idempotency_key"] == \
        "create_invoice:acme|2026-0042"

    # ...and by searching a reference first: an invoice an earlier attempt made is found
    crashed = {"customer": "acme", "number": "2026-0043", "total": 99}
    import requests
    requests.post(f"{sink.url}/{scope}/invoices",
                  json={**crashed, "reference": "order-acme|2026-0043"}, timeout=10)
    assert ns["create_invoice_without_downstream_keys"](crashed) == f"{scope}/invoices-2"
    assert sink.count(f"{scope}/invoices") == 2  # found, not created again

    # 3. answer first, work after
    hook = {"id": f"hook-{scope}", "contact": {"email": "ann@example.com"}}
    status, _ = ns["receive_webhook"](hook)
    assert status == 202
    assert ns["receive_webhook"](hook)[0] in (200, 202)  # a resend: never queued twice
    ns["work"].join()
    assert ns["receive_webhook"](hook) == (200, {"status": "done",
                                                 "contact": f"{scope}/contacts-1"})
    assert sink.count(f"{scope}/contacts") == 1
    recipe_3_failures(ns, service, sink, scope, caplog)


def recipe_3_failures(ns, service, sink, scope, caplog):
    """A job that fails unexpectedly is logged and the worker goes on; permanent refusals are
    not answered "retry" (503), an outage is."""
    from keystore_client import KeyStore, RetryPolicy
    contacts = f"{scope}/contacts"
    sink.fail_next(contacts, 1, status=400)  # billing refuses: an HTTPError, not BillingBusy
    broken = {"id": f"broken-{scope}", "contact": {"email": "bob@example.com"}}
    assert ns["receive_webhook"](broken)[0] == 202
    later = {"id": f"later-{scope}", "contact": {"email": "cy@example.com"}}
    assert ns["receive_webhook"](later)[0] == 202
    sink.wait_for(contacts, 2, timeout=15)  # the worker survived the failing job
    ns["work"].join()
    failed = [r for r in caplog.records if f"broken-{scope}" in r.getMessage()]
    assert failed and failed[0].levelname == "ERROR" and failed[0].exc_info  # logged, traced
    assert ns["receive_webhook"](broken) == (202, {"status": "in progress"})  # left to its lease

    status, body = ns["receive_webhook"]({**later, "contact": {"email": "other@example.com"}})
    assert (status, body["status"]) == (422, "refused") and "different payload" in body["reason"]

    stale = {"id": f"stale-{scope}", "contact": {"email": "di@example.com"}}
    ns["ks"].claim("sync_contact", stale["id"], payload=stale, lease_seconds=1)
    time.sleep(1.1)  # that attempt died: its lease ran out with an unknown outcome
    status, body = ns["receive_webhook"](stale)
    assert (status, body["status"]) == (409, "refused") and "person" in body["reason"]

    ns["ks"] = KeyStore(f"http://127.0.0.1:{free_port()}", service.token,
                        retry=RetryPolicy.never())  # the key store is down
    assert ns["receive_webhook"]({"id": f"down-{scope}"}) == (503, {"status": "try again later"})
