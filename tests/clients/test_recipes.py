"""docs/recipes.md runs as written: its Python blocks, in order, in one session, against the
real service (a `keystore serve` per backend, whose relays make the sends), with the effect
sink standing in for the billing API (it counts each effect and keeps its Idempotency-Key)
and the scripted downstream API for the accounting API without idempotency keys (its
failure windows: a created invoice whose answer is lost, a 500 that created nothing)."""
from __future__ import annotations

import time

import pytest

from tests.support import free_port
from tests.support.downstream import Downstream, answer, drop

from .conftest import REPO
from .support import code_blocks

PAGE = REPO / "docs" / "recipes.md"
BILLING_KEY, ACCOUNTS_KEY = "sk_test_billing_5b1f", "acct_test_9c2e"
SETTLED_SECONDS = 45  # a retry's backoff and a check, on a loaded 2-core machine


def eventually(call, timeout: float = SETTLED_SECONDS):
    """What `call()` returns once it is not None (a send still under way answers None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = call()
        if got is not None:
            return got
        time.sleep(0.3)
    raise AssertionError(f"not settled within {timeout} s")


@pytest.fixture
def accounts():
    with Downstream() as api:  # no idempotency keys: every POST creates
        yield api


def test_the_recipes_run(service, sink, accounts, scope, monkeypatch, caplog):
    for name, value in {"KEYSTORE_URL": service.url, "KEYSTORE_TOKEN": service.token,
                        "KEYSTORE_OPERATOR_TOKEN": service.operator_token,
                        "BILLING_API_KEY": BILLING_KEY,
                        "ACCOUNTS_API_KEY": ACCOUNTS_KEY}.items():
        monkeypatch.setenv(name, value)
    blocks = code_blocks(PAGE, "python")
    ns: dict = {}
    exec(compile(blocks[0], "recipes.md#setup", "exec"), ns)
    ns["BILLING_URL"] = f"{sink.url}/{scope}"  # the billing API is the effect sink here
    ns["ACCOUNTS_URL"] = f"{accounts.url}/{scope}"
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

    recipe_2_sends(ns, sink, scope)
    recipe_2_checks(ns, accounts, scope)

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


def recipe_2_sends(ns, sink, scope):
    """The key store makes billing's POST once, with the key as its Idempotency-Key; a 503 is
    sent again under the same key, a 422 is kept and raised on every repeat."""
    invoices = f"{scope}/invoices"
    order = {"customer": "acme", "number": f"{scope}-1", "total": 1250}
    invoice = ns["create_invoice"](order)
    assert invoice == f"{invoices}-1" and ns["create_invoice"](order) == invoice
    (made,) = sink.items(invoices)
    assert made["body"] == order and made["idempotency_key"] == f"create_invoice:acme|{scope}-1"

    busy = {"customer": "acme", "number": f"{scope}-2", "total": 5}
    sink.fail_next(invoices, 1, status=503)
    assert eventually(lambda: ns["create_invoice"](busy)) == f"{invoices}-2"
    assert [i["idempotency_key"] for i in sink.items(invoices)][1] == \
        f"create_invoice:acme|{scope}-2"

    refused = {"customer": "acme", "number": f"{scope}-3", "total": -1}
    sink.fail_next(invoices, 1, status=422)
    with pytest.raises(ValueError, match="billing refused order"):
        ns["create_invoice"](refused)
    with pytest.raises(ValueError, match="billing refused order"):  # kept: nothing sent
        ns["create_invoice"](refused)
    assert sink.count(invoices) == 2


def recipe_2_checks(ns, accounts, scope):
    """Without idempotency keys: a created invoice whose answer was lost is found by the
    connection's check (one invoice, one POST); a 500 that created nothing is ruled out by it
    and sent again under the same key (one invoice, two POSTs)."""
    lost = {"customer": "acme", "number": f"{scope}-4", "total": 99}
    ref = f"book_invoice:acme|{scope}-4"
    accounts.script(drop(), key=ref)  # created, then the connection closes: no answer
    found = eventually(lambda: ns["book_invoice"](lost))
    assert [i["id"] for i in accounts.shown(ref)] == [found]
    assert accounts.requests(ref) == 1 and accounts.requests(ref, method="GET") >= 1
    assert ns["ks"].lookup("book_invoice", f"acme|{scope}-4").state == "succeeded"
    assert ns["book_invoice"](lost) == found  # a repeat: the same invoice, nothing sent

    failed = {"customer": "acme", "number": f"{scope}-5", "total": 7}
    ref = f"book_invoice:acme|{scope}-5"
    accounts.script(answer(500), key=ref)  # an unknown outcome; nothing was created
    made = eventually(lambda: ns["book_invoice"](failed))
    assert [i["id"] for i in accounts.shown(ref)] == [made]
    assert accounts.requests(ref) == 2 and accounts.created(ref) == 1
    for seen in accounts.requests_seen(ref) + accounts.requests_seen(ref, method="GET"):
        assert seen.headers["authorization"] == f"Bearer {ACCOUNTS_KEY}"
        assert "idempotency-key" not in seen.headers


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
