"""The record page shows a mismatch's kept payloads side by side with the JSON paths that
differ (no script: marks and a list), and a key's late repeats (issue 15), both backends."""
from __future__ import annotations

from .support import SCOPE, record_url


def test_kept_payloads_side_by_side_with_the_differing_paths(browser, acme, tokens):
    body = {"scope": SCOPE, "key": "evt_kept", "keep_payload": True,
            "payload": {"amount": 100, "to": "<b>acme</b>", "lines": [1, 2]}}
    assert acme.post("/v1/claim", body)[0] == 201
    refused = {**body, "payload": {"amount": 999, "to": "<b>acme</b>", "lines": [1, 2, 3]}}
    assert acme.post("/v1/claim", refused)[0] == 422
    browser.sign_in(tokens["ana"])
    browser.get(record_url("evt_kept"))
    html = browser.html
    assert "Both payloads were kept" in html
    assert "<code>/amount</code>" in html and "<code>/lines/2</code>" in html
    assert "/to" not in html.split("Differs at", 1)[1].split("</p>", 1)[0]
    assert "<mark>" in html and "&#34;amount&#34;: 999" in html
    assert "<b>acme</b>" not in html  # escaped, never markup


def test_without_kept_payloads_the_page_says_how_to_get_them(browser, acme, tokens):
    body = {"scope": SCOPE, "key": "evt_plain", "payload": {"n": 1}}
    acme.post("/v1/claim", body)
    acme.post("/v1/claim", {**body, "payload": {"n": 2}})
    browser.sign_in(tokens["ana"])
    browser.get(record_url("evt_plain"))
    assert "keep_payload: true" in browser.html


def test_a_late_repeat_is_listed_and_its_review_explained(app, browser, acme, tokens, clock):
    body = {"scope": SCOPE, "key": "evt_late", "payload": {"n": 1}, "ttl_seconds": 60}
    status, claimed, _ = acme.post("/v1/claim", body)
    acme.post("/v1/complete", {"scope": SCOPE, "key": "evt_late",
                               "lease_token": claimed["lease_token"], "state": "succeeded",
                               "result": {"resource_id": "INV-77"}})
    clock.advance(61)
    app.extensions["keystore"].jobs.sweep()
    status, _, _ = acme.post("/v1/claim", {**body, "on_late_repeat": "review"})
    assert status == 409
    browser.sign_in(tokens["ana"])
    browser.get(record_url("evt_late"))
    assert "Late repeats" in browser.html and "<code>INV-77</code>" in browser.html
    assert "after its retention window" in browser.html
    assert "lease ran out" not in browser.html
