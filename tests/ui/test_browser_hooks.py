"""The Webhooks section in a real headless Chromium (as tests/ui/test_browser.py: Debian's
/usr/bin/chromium driven by Playwright) against a real `keystore serve`, whose workers run the
relay: a delivery the destination refused is found on the page and redelivered, and the
destination then gets it (same Idempotency-Key, the next Keystore-Attempt). A held body is
shown beside the original. Screenshots go to test-artifacts/ui/; docs/img/webhooks-page.png
and webhooks-held.png are the SQLite run's hooks-failed.png and hooks-held-top.png.
"""
from __future__ import annotations

import json

from .browser_hooks_support import send, served, sink, source, state, wait_for
from .chromium import ARTIFACTS, chromium, page, sign_in

__all__ = ["chromium", "page", "served", "sink"]
def test_a_failed_delivery_is_found_on_the_page_and_redelivered(served, page, sink):
    from playwright.sync_api import expect
    backend, server, operator = served
    sink.answer = lambda n, r: 422 if n == 0 else 200  # the workflow refuses it, then takes it
    url = source(served, sink, "stripe-invoices")
    assert send(url, "evt_1Q2w3E", {"id": "evt_1Q2w3E", "type": "invoice.paid",
                                    "amount_paid": 1250}) == 202
    wait_for(lambda: state(served, "stripe-invoices", "evt_1Q2w3E") == "failed",
             "the relay forwards the event and gives up on the 422")
    sign_in(page, server, operator)
    page.get_by_role("link", name="Webhooks").click()
    expect(page.get_by_role("heading", name="Webhooks")).to_be_visible()
    source_row = page.locator("table.sources tbody tr").filter(has_text="stripe-invoices")
    expect(source_row).to_contain_text("HTTP 422")
    row = page.locator("table.deliveries tbody tr").filter(has_text="evt_1Q2w3E")
    expect(row).to_contain_text("failed")
    expect(row).to_contain_text("HTTP 422")
    page.screenshot(path=str(ARTIFACTS / f"{backend}-hooks-failed.png"), full_page=True)

    row.get_by_role("button", name="Redeliver").click()
    expect(page.get_by_role("status")).to_contain_text("Redelivered: the event is queued")
    expect(page.get_by_role("heading", name="Event evt_1Q2w3E")).to_be_visible()
    wait_for(lambda: len(sink.requests) == 2, "the relay forwards the redelivered event")
    again = sink.requests[1]
    assert again["headers"]["Idempotency-Key"] == "evt_1Q2w3E"
    assert again["headers"]["Keystore-Attempt"] == "2"
    assert json.loads(again["body"])["amount_paid"] == 1250
    wait_for(lambda: state(served, "stripe-invoices", "evt_1Q2w3E") == "delivered",
             "the delivery is settled")
    page.reload()
    expect(page.locator(".heading .state")).to_have_text("delivered")
    expect(page.get_by_role("heading", name="Delivery failed")).to_have_count(0)
    page.screenshot(path=str(ARTIFACTS / f"{backend}-hooks-redelivered.png"), full_page=True)


def test_a_held_body_is_shown_beside_the_original(served, page, sink):
    from playwright.sync_api import expect
    backend, server, operator = served
    url = source(served, sink, "shop-orders")
    order = {"id": 820982911946154508, "email": "jon@example.com", "total_price": "199.00",
             "note": "<script>document.title='owned'</script>"}
    assert send(url, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", order) == 202
    wait_for(lambda: len(sink.requests) == 1, "the relay forwards the event")
    assert send(url, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
                {**order, "total_price": "1990.00"}) == 200  # held
    sign_in(page, server, operator)
    page.goto(server.url + "/ui/hooks")
    row = page.locator("table.sources tbody tr").filter(has_text="shop-orders")
    expect(row.get_by_title("Changed bodies held for review")).to_have_text("1")  # held
    page.goto(server.url + "/ui/hooks/deliveries?source=shop-orders")
    page.get_by_role("link", name="b54557e4-bdd9-4b37-8a5f-bf7d70bcd043").click()
    held = page.locator("article").filter(has=page.get_by_role("heading", name="Original"))
    expect(page.get_by_role("heading", name="Held: a changed body under this event id")) \
        .to_be_visible()
    expect(held.locator("pre.body mark").first).to_contain_text('"total_price": "199.00"')
    expect(held.locator("pre.body mark").last).to_contain_text('"total_price": "1990.00"')
    expect(held.locator("pre.body").first).to_contain_text("<script>document.title")
    assert page.title() != "owned"  # the body's markup is text, never run
    page.screenshot(path=str(ARTIFACTS / f"{backend}-hooks-held.png"), full_page=True)
    page.screenshot(path=str(ARTIFACTS / f"{backend}-hooks-held-top.png"))  # the docs' image
    held.get_by_role("button", name="Dismiss").click()
    expect(page.get_by_role("status")).to_contain_text("Dismissed: the review is closed")
    expect(page.get_by_role("heading", name="Held: a changed body under this event id")) \
        .to_have_count(0)
    assert len(sink.requests) == 1  # the held body was never forwarded
