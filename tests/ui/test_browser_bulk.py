"""A bulk redelivery driven in a real headless Chromium (as tests/ui/test_browser_hooks.py)
against a real `keystore serve`: the filter, "N events match", the confirm step, the job page
whose progress bar refreshes itself (a meta refresh: the page runs no script) until the job
is done, and the destination getting each event again under its identity; then a long job
cancelled from its page, stopping with part of its events handled."""
from __future__ import annotations

from tests.support import Api

from .browser_hooks_support import WAIT_S, send, served, sink, source, state, wait_for
from .chromium import ARTIFACTS, chromium, page, sign_in

__all__ = ["chromium", "page", "served", "sink"]
MANY = 300  # events of the job that is cancelled: paced, it runs for 10 s however fast
SERVE_ENV = {"KEYSTORE_BULK_EVENTS_PER_SECOND": "30"}  # the machine is (the click takes < 2 s)


def test_a_bulk_redelivery_with_its_progress_bar(served, page, sink):
    from playwright.sync_api import expect
    backend, server, operator = served
    sink.answer = lambda n, r: 422 if n < 3 else 200  # refuses the three, then takes them
    url = source(served, sink, "bulk-invoices")
    for n in range(3):
        assert send(url, f"evt_b{n}", {"id": f"evt_b{n}", "type": "invoice.paid"}) == 202
    for n in range(3):
        wait_for(lambda n=n: state(served, "bulk-invoices", f"evt_b{n}") == "failed",
                 "the relay gives up on the 422")
    sign_in(page, server, operator)
    expect(page.get_by_role("link", name="Webhooks")).to_be_visible()  # signed in
    page.goto(server.url + "/ui/hooks/deliveries?source=bulk-invoices")
    page.get_by_role("link", name="Act on many at once…").click()
    page.get_by_label("State").select_option("failed")
    page.get_by_role("button", name="Count the events").click()
    expect(page.get_by_role("heading", name="3 events match")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / f"{backend}-bulk-count.png"), full_page=True)
    page.get_by_label("Yes: redeliver these 3 events").check()
    page.get_by_role("button", name="Redeliver 3 events").click()
    expect(page.get_by_role("heading", name="Redeliver: job")).to_be_visible()
    expect(page.locator("progress")).to_be_visible()
    # the page reloads itself every 2 s until the job is done
    expect(page.locator(".job-state")).to_have_text("done", timeout=WAIT_S * 1000)
    expect(page.locator("progress")).to_have_attribute("value", "3")
    page.screenshot(path=str(ARTIFACTS / f"{backend}-bulk-done.png"), full_page=True)
    wait_for(lambda: len(sink.requests) == 6, "the relay forwards the three again")
    again = sorted(sink.requests[3:], key=lambda r: r["headers"]["Idempotency-Key"])
    assert [r["headers"]["Idempotency-Key"] for r in again] == ["evt_b0", "evt_b1", "evt_b2"]
    assert {r["headers"]["Keystore-Attempt"] for r in again} == {"2"}


def test_a_long_bulk_job_is_cancelled_from_its_page(served, page, sink):
    from playwright.sync_api import expect
    backend, server, operator = served
    url = source(served, sink, "bulk-paused")
    api = Api(server.url, operator)
    assert api.post("/v1/sources/bulk-paused/pause", {"reason": "bulk test"})[0] == 200
    for n in range(MANY):  # held queued: the source is paused
        assert send(url, f"evt_p{n}", {"id": f"evt_p{n}", "type": "order.created"}) == 202
    sign_in(page, server, operator)
    expect(page.get_by_role("link", name="Webhooks")).to_be_visible()  # signed in
    page.goto(server.url + "/ui/hooks/bulk?action=retry")
    page.get_by_label("Source").select_option("bulk-paused")
    page.get_by_label("State").select_option("queued")
    page.get_by_role("button", name="Count the events").click()
    expect(page.get_by_role("heading", name=f"{MANY} events match")).to_be_visible()
    page.get_by_label(f"Yes: retry now these {MANY} events").check()
    page.get_by_role("button", name=f"Retry now {MANY} events").click()
    page.get_by_role("button", name="Cancel the job").click()
    expect(page.get_by_role("status").first).to_contain_text("Cancel asked")
    expect(page.locator(".job-state")).to_have_text("cancelled")
    page.screenshot(path=str(ARTIFACTS / f"{backend}-bulk-cancelled.png"), full_page=True)
    job_id = int(page.url.split("/jobs/")[1].split("?")[0])
    status, body, _ = api.get(f"/v1/jobs/{job_id}")
    job = body["job"]
    assert job["state"] == "cancelled" and job["done"] + job["skipped"] < MANY, job
    assert sink.requests == []  # paused: nothing was forwarded
