"""The Webhooks section's controls in a real headless Chromium (Debian's /usr/bin/chromium
through Playwright, as test_browser_hooks.py) against a real `keystore serve` whose workers
run the relay (issue 27): Retry now on a source and on a queued event sends what waited on
its backoff at once; Pause holds a source's events (accepted, not forwarded; its reason
shown as typed, never as markup) until Resume lets them out. Screenshots go to
test-artifacts/ui/."""
from __future__ import annotations

import json
import time

from tests.support import Api

from .browser_hooks_support import send as send_signed
from .browser_hooks_support import served, sink, source, wait_for
from .chromium import ARTIFACTS, chromium, page, sign_in

__all__ = ["chromium", "page", "served", "sink"]  # fixtures
DOWN = (500, {"Retry-After": "600"})  # refused, and the next try ten minutes away


def send(ingest_url: str, event_id: str) -> int:
    return send_signed(ingest_url, event_id, {"id": event_id})


def sent(sink) -> list[str]:
    return [json.loads(r["body"])["id"] for r in sink.requests]


def test_retry_now_on_a_source_and_on_an_event(served, page, sink):
    from playwright.sync_api import expect
    backend, server, operator = served
    down = [True]
    sink.answer = lambda n, r: DOWN if down[0] else 200
    url = source(served, sink, "crm")
    assert send(url, "evt_a") == 202
    assert send(url, "evt_b") == 202
    wait_for(lambda: sorted(sent(sink)) == ["evt_a", "evt_b"], "both refused once")
    down[0] = False  # the workflow is back; both wait ten minutes on their backoff
    sign_in(page, server, operator)
    page.goto(server.url + "/ui/hooks")
    row = page.locator("table.sources tbody tr").filter(has_text="crm")
    expect(row.locator("td.queued")).to_have_text("2")
    page.screenshot(path=str(ARTIFACTS / f"{backend}-hooks-retry.png"), full_page=True)
    row.get_by_role("button", name="Retry now").click()
    expect(page.locator("p.done")).to_contain_text("Retry now: the queued events are due")
    wait_for(lambda: sorted(sent(sink)) == ["evt_a", "evt_a", "evt_b", "evt_b"],
             "both forwarded at once")
    page.reload()
    expect(row.locator("td.queued")).to_have_text("0")
    expect(row.get_by_role("button", name="Retry now")).to_have_count(0)

    down[0] = True
    assert send(url, "evt_c") == 202
    wait_for(lambda: sent(sink).count("evt_c") == 1, "evt_c refused once")
    down[0] = False
    page.goto(server.url + "/ui/hooks/event?source=crm&event_id=evt_c")
    page.get_by_role("button", name="Retry now").click()
    expect(page.locator("p.done")).to_contain_text("Retry now: the queued events are due")
    wait_for(lambda: sent(sink).count("evt_c") == 2, "evt_c forwarded at once")


def test_a_source_is_paused_and_resumed_on_the_page(served, page, sink):
    from playwright.sync_api import expect
    backend, server, operator = served
    url = source(served, sink, "shop")
    sign_in(page, server, operator)
    page.goto(server.url + "/ui/hooks")
    row = page.locator("table.sources tbody tr").filter(has_text="shop")
    row.get_by_text("Pause…").click()
    row.get_by_label("Reason").fill("<b>deploying</b> the workflow")
    row.get_by_role("button", name="Pause", exact=True).click()
    expect(page.locator("p.done")).to_contain_text("Paused: events are still accepted")
    expect(row.locator("td.pause")).to_contain_text("paused by an operator")
    expect(row.locator(".pause-reason")).to_have_text("<b>deploying</b> the workflow")
    expect(row.locator("td.pause b")).to_have_count(0)  # the reason is text, not markup
    assert send(url, "evt_1") == 202  # accepted while paused
    time.sleep(2.5)  # two sweeps and more: nothing goes out
    assert sink.requests == []
    page.reload()
    expect(row.locator("td.queued")).to_have_text("1")
    page.screenshot(path=str(ARTIFACTS / f"{backend}-hooks-paused.png"), full_page=True)
    row.get_by_role("button", name="Resume").click()
    page.wait_for_url(server.url + "/ui/hooks")  # the redirect has landed: a reload() in it fails
    wait_for(lambda: sent(sink) == ["evt_1"], "the resume lets the event out")
    page.reload()
    expect(row.locator("td.pause")).not_to_contain_text("paused by")
    _, _, operator_token = served
    status, body, _ = Api(server.url, operator_token).get("/v1/sources/shop")
    assert status == 200 and body["source"]["paused"] is None
