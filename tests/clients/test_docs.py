"""The documentation works: each platform page carries its snippet exactly as shipped (so
what a user pastes from the docs is what the snippet tests ran), every Python block parses,
and the Python client page's code runs against the real service (docs/recipes.md's:
test_recipes.py)."""
from __future__ import annotations

import ast

import pytest
import requests

from .conftest import REPO
from .downstream import Downstream
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


@pytest.fixture
def billing_api(service):
    """The page's connection "billing" (its operator's curl), to a real API on 127.0.0.1
    that answers the page's invoice with 201 {"id": "INV-44"}."""
    with Downstream() as api:
        api.script("/api/invoices", 201, {"id": "INV-44"})
        body = {"base_url": f"{api.url}/api", "headers": {"Authorization": "Bearer sk_test"},
                "idempotency_header": "Idempotency-Key"}
        auth = {"Authorization": f"Bearer {service.operator_token}"}
        made = requests.post(f"{service.url}/v1/connections", json={"name": "billing", **body},
                             headers=auth, timeout=10)
        if made.status_code != 201:  # the page ran before on this service: point it here
            made = requests.patch(f"{service.url}/v1/connections/billing", json=body,
                                  headers=auth, timeout=10)
        assert made.status_code in (200, 201), made.text
        yield api
        # other pages name their connection "billing" too: leave the tenant without it
        gone = requests.delete(f"{service.url}/v1/connections/billing", headers=auth, timeout=10)
        assert gone.status_code in (200, 204), gone.text


def test_the_python_client_page_runs_as_written(service, billing_api, monkeypatch, capsys):
    """Every Python block of docs/python-client.md runs as the page says: in order, in one
    session, with KEYSTORE_URL and KEYSTORE_TOKEN set, against the real service. Its
    stand-ins (mailer, billing, crm, alert) print what they do, so the output shows which
    side effects ran: each once; the send's API got one request."""
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
        "sent INV-44", "replay INV-44",  # one request to the API, its answer twice
        "ALERT: event evt_1Q2w3E changed: "
        + ns["ks"].lookup("create_invoice", "evt_1Q2w3E").fingerprint,
    ]
    assert ns["once_only"].retry.tries == 1 and ns["patient"].retry.tries == 6
    derive_key = ns["derive_key"]
    assert derive_key("acme", "2026-W48") == "acme|2026-W48"
    assert derive_key("acme", ns["date"](2026, 11, 30), 42) == "acme|2026-11-30|42"
    for r in ns["results"]:
        assert ns["ks"].lookup("orders", r.key).state == "succeeded"
    [invoice] = billing_api.requests_to("/api/invoices")
    assert invoice.json() == ns["order_1044"]
    assert invoice.headers["idempotency-key"] == "create_invoice:acme|2026-0044"
