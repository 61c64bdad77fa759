"""The operators' page's Webhooks section through Flask's test client, on both backends:
sources with their queues, failed deliveries redelivered (and delivered ones only with the
box ticked), a held body beside the original, a failed delivery's review, tenants apart.
Forwarding is driven by hand on the test clock (hooks_support.pump)."""
from __future__ import annotations

import json
import re

import pytest

from tests.support import Http

from .hooks_support import (
    BODY,
    ana,
    create_source,
    deliver,
    delivery,
    hooks_settings,
    pump,
    shop,
    sink,
    text,
)
from .support import forms

__all__ = ["ana", "shop", "sink"]
CHANGED = json.dumps({"id": "evt_1", "amount": 9999}).encode()


@pytest.fixture
def ui_settings(database_url):
    return hooks_settings(database_url)


def failed_once(app, client, shop, sink, event_id="evt_1", body=BODY) -> None:
    """An event the destination refuses with a 400 (given up at once), then takes."""
    sink.answer = lambda n, r: 400 if n == 0 else 200
    assert deliver(client, shop, body, event_id) == 202
    assert pump(app) == ["failed"]


def open_reviews(http, **filters) -> list:
    return http.get("/v1/reviews", **filters)[1]["reviews"]


def test_the_section_shows_each_source_with_its_queue(app, ana, operator, tokens, sink,
                                                       clock):
    shop = create_source(operator, tokens["ana"], sink.url)
    create_source(operator, tokens["ana"], "http://127.0.0.1:9/webhook/crm?x=<b>", name="crm")
    client = app.test_client()
    sink.answer = lambda n, r: 400 if n == 0 else (429, {"Retry-After": "120"})
    deliver(client, shop, event_id="e1")
    assert pump(app) == ["failed"]
    clock.advance(60)
    deliver(client, shop, json.dumps({"n": 2}).encode(), "e2")
    deliver(client, shop, json.dumps({"n": 3}).encode(), "e3")
    assert pump(app, limit=1) == ["retry"]  # e2: a 429 with Retry-After pauses the source
    forwarding = app.extensions["keystore"].gateway.forwarding
    clock.advance(125)
    assert len(forwarding.take("stalled-relay", 1)) == 1  # being forwarded, not settled
    clock.advance(60)
    assert ana.get("/ui/hooks").status_code == 200
    (crm, row) = [text(r) for r in re.findall(r"<tr>.*?</tr>", ana.html, re.S)
                  if "testing" in r]
    assert crm == ("crm testing active http://127.0.0.1:9/webhook/crm?x=&lt;b&gt; 0 0 0 0 — — — "
                   "ok Pause… Reason Until empty: until resumed Pause —")  # health, pause, actions
    # queued 1 (e3), being forwarded 1 (e2), failed 1 (e1), held 0; e3 waiting since it came
    assert row.startswith(f"shop testing active {sink.url} 1 1 1 0 waiting 3 min "), row
    assert " HTTP 429 " in row
    assert 'href="/ui/hooks/deliveries?source=shop&amp;state=failed">1</a>' in ana.html
    clock.advance(-185)  # while the pause lasts, the page says until when
    ana.get("/ui/hooks")
    assert "2027-01-15 08:03:00 UTC" in ana.html and "in 2 min" in ana.html


def test_a_failed_delivery_is_redelivered_from_the_page(app, ana, operator, shop, sink):
    failed_once(app, app.test_client(), shop, sink)
    assert ana.get("/ui/hooks").status_code == 200
    (row,) = re.findall(r"<tr>\s*<td class=\"key\">.*?</tr>", ana.html, re.S)
    assert "evt_1" in row and "HTTP 400" in row and "Redeliver" in row
    (form,) = [f for f in forms(row) if f["action"] == "/ui/hooks/redeliver"]
    assert form["hidden"] == {"csrf_token": ana.csrf, "source": "shop", "event_id": "evt_1"}
    assert len(open_reviews(operator, kind="delivery_failed")) == 1
    resp = ana.post("/ui/hooks/redeliver", {"source": "shop", "event_id": "evt_1"})
    assert resp.status_code == 303
    assert resp.headers["Location"] == "/ui/hooks/event?source=shop&event_id=evt_1" \
                                       "&done=redelivered"
    assert delivery(operator)["state"] == "queued"
    assert open_reviews(operator, kind="delivery_failed") == []  # closed: redelivered
    ana.get(resp.headers["Location"])
    assert "Redelivered: the event is queued" in ana.html
    assert pump(app) == ["delivered"]
    assert [r["headers"]["Keystore-Attempt"] for r in sink.requests] == ["1", "2"]
    assert {r["headers"]["Idempotency-Key"] for r in sink.requests} == {"evt_1"}
    assert sink.requests[1]["body"] == BODY


def test_a_delivered_event_goes_again_only_with_the_box_ticked(app, ana, operator, shop,
                                                               sink):
    assert deliver(app.test_client(), shop) == 202
    assert pump(app) == ["delivered"]
    ana.get("/ui/hooks/deliveries")
    assert 'href="/ui/hooks/event?source=shop&amp;event_id=evt_1#again">Redeliver…' in ana.html
    ana.get("/ui/hooks/event", source="shop", event_id="evt_1")
    assert "a second time" in text(ana.html) and "Yes, deliver it again" in ana.html
    (form,) = [f for f in forms(ana.html) if f["action"] == "/ui/hooks/redeliver"]
    assert 'type="checkbox" id="force" name="force" value="true" required' in ana.html
    resp = ana.post("/ui/hooks/redeliver", {"source": "shop", "event_id": "evt_1"})
    assert resp.status_code == 409 and "tick “Yes, deliver it again”" in ana.html
    for value in ("1", "on", "TRUE", "true ", "false"):
        ana.get("/ui/hooks/event", source="shop", event_id="evt_1")
        resp = ana.post("/ui/hooks/redeliver", {"source": "shop", "event_id": "evt_1",
                                                "force": value})
        assert resp.status_code == 400 and "Nothing was changed" in ana.html, value
    assert delivery(operator)["state"] == "delivered" and len(sink.requests) == 1
    ana.get("/ui/hooks/event", source="shop", event_id="evt_1")
    resp = ana.post("/ui/hooks/redeliver", {"source": "shop", "event_id": "evt_1",
                                            "force": "true"})
    assert resp.status_code == 303 and delivery(operator)["state"] == "queued"
    assert pump(app) == ["delivered"] and len(sink.requests) == 2


def test_a_queued_or_dropped_event_cannot_be_redelivered(app, ana, operator, shop, sink, clock):
    client = app.test_client()
    assert deliver(client, shop) == 202
    ana.get("/ui/hooks/event", source="shop", event_id="evt_1")
    assert "Redeliver" not in ana.html  # queued: no button
    resp = ana.post("/ui/hooks/redeliver", {"source": "shop", "event_id": "evt_1",
                                            "force": "true"})
    assert resp.status_code == 409 and "queued or being forwarded right now" in ana.html
    assert 'href="/ui/hooks/event?source=shop&amp;event_id=evt_1"' in ana.html  # the way back
    status, _, _ = operator.post("/v1/sources", {"name": "brief", "provider": "testing",
                                                 "secrets": ["test-secret-1"],
                                                 "destination": {"url": sink.url},
                                                 "keep_body_seconds": 60})
    brief = operator.get("/v1/sources/brief")[1]["source"]
    assert deliver(client, brief, event_id="evt_b") == 202
    assert sorted(pump(app)) == ["delivered", "delivered"]
    clock.advance(61)
    app.extensions["keystore"].jobs.sweep()  # drops the delivered body after 60 s
    ana.get("/ui/hooks/event", source="brief", event_id="evt_b")
    assert "no longer kept" in ana.html and "Redeliver anyway" not in ana.html
    resp = ana.post("/ui/hooks/redeliver", {"source": "brief", "event_id": "evt_b",
                                            "force": "true"})
    assert resp.status_code == 409 and "body is no longer kept" in ana.html
    assert delivery(operator, "evt_b", "brief")["state"] == "delivered"
    assert deliver(client, brief, CHANGED, "evt_b") == 200  # held, beside a dropped original
    ana.get("/ui/hooks/event", source="brief", event_id="evt_b")
    held = ana.html.split('id="held-h"', 1)[1].split("</section>", 1)[0]
    assert "No longer kept" in held and "&#34;amount&#34;: 9999" in held


def test_a_held_body_is_shown_beside_the_original_escaped(app, ana, operator, shop, sink):
    client = app.test_client()
    assert deliver(client, shop) == 202
    hostile = {"id": "evt_1", "amount": 9999, "note": "</pre><script>alert(1)</script>",
               "name": "a\u202eb\u200bc"}
    assert deliver(client, shop, json.dumps(hostile).encode()) == 200  # held
    assert ana.get("/ui/hooks/event", source="shop", event_id="evt_1").status_code == 200
    assert "Held: a changed body under this event id" in ana.html
    left, right = re.findall(r'<pre class="body">(.*?)</pre>', ana.html, re.S)
    assert '<mark>  &#34;amount&#34;: 1250,</mark>' in left
    assert '<mark>  &#34;amount&#34;: 9999,</mark>' in right
    assert '  &#34;id&#34;: &#34;evt_1&#34;' in right and "<mark>  &#34;id" not in right
    assert "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in right
    assert "<script" not in ana.html
    assert "a\\u202eb\\u200bc" in right and "\u202e" not in ana.html  # made visible
    assert "X-Test-Signature" in ana.html  # each delivery's headers, folded
    assert delivery(operator)["state"] == "queued" and len(sink.requests) == 0


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_held_bodies_of_any_shape_make_a_calm_page(app, ana, operator, shop):
    client = app.test_client()
    cases = {"text": (b"plain text \xff body", b"plain text body, changed"),
             "deep": (b"[" * 50_000 + b"]" * 50_000, b"[" * 50_001 + b"]" * 50_001),
             "big": (b'{"a": 1}', json.dumps({"pad": "x" * 70_000}).encode()),
             "long": (json.dumps({"pad": "y" * 200_000}).encode(), b'{"b": 2}')}
    for name, (first, second) in cases.items():
        assert deliver(client, shop, first, name) == 202, name
        assert deliver(client, shop, second, name) == 200, name
        resp = ana.get("/ui/hooks/event", source="shop", event_id=name)
        assert resp.status_code == 200, name
        assert "Held: a changed body" in ana.html, name
        assert len(ana.html) < 200_000, name  # a body is cut to 64 KiB on the page
    ana.get("/ui/hooks/event", source="shop", event_id="text")
    assert "plain text \ufffd body" in ana.html and "text · 17 bytes" in ana.html
    ana.get("/ui/hooks/event", source="shop", event_id="big")
    assert "over the 64 KiB a held body is kept" in ana.html
    ana.get("/ui/hooks/event", source="shop", event_id="long")
    assert "200011 bytes · the first 65536 characters are shown" in ana.html


def test_dismissing_a_held_body_keeps_the_original_and_writes_the_audit_row(
        app, ana, operator, shop):
    client = app.test_client()
    assert deliver(client, shop) == 202 and deliver(client, shop, CHANGED) == 200
    (review,) = open_reviews(operator, kind="fingerprint_mismatch")
    ana.get("/ui/hooks/event", source="shop", event_id="evt_1")
    (form,) = [f for f in forms(ana.html) if f["action"] == "/ui/hooks/dismiss"]
    assert form["hidden"]["review_id"] == str(review["id"])
    resp = ana.post("/ui/hooks/dismiss", form["hidden"])
    assert resp.status_code == 303 and resp.headers["Location"].endswith("&done=dismissed")
    ana.get(resp.headers["Location"])
    assert "Dismissed: the review is closed" in ana.html and "Held:" not in ana.html
    assert open_reviews(operator) == []
    assert delivery(operator)["state"] == "queued"
    ana.get("/ui/record", scope="hook:shop", key="evt_1")
    assert "dismiss by ana" in text(ana.html)
    resp = ana.post("/ui/hooks/dismiss", form["hidden"])  # a second press: already closed
    assert resp.status_code == 404 and "no open review" in ana.html


def test_a_delivery_failed_review_shows_the_last_answers_and_can_be_dismissed(
        app, ana, operator, shop, sink):
    failed_once(app, app.test_client(), shop, sink)
    (review,) = open_reviews(operator, kind="delivery_failed")
    ana.get("/ui/hooks/event", source="shop", event_id="evt_1")
    section = ana.html.split('id="failed-h"', 1)[1].split("</section>", 1)[0]
    assert "HTTP 400" in section and "{&#34;n&#34;: 0}" in section  # the sink's answer
    actions = {f["action"] for f in forms(section)}
    assert actions == {"/ui/hooks/redeliver", "/ui/hooks/dismiss"}
    resp = ana.post("/ui/hooks/dismiss", {"source": "shop", "event_id": "evt_1",
                                          "review_id": str(review["id"])})
    assert resp.status_code == 303
    assert open_reviews(operator) == [] and delivery(operator)["state"] == "failed"
    status, body, _ = operator.get("/v1/reviews", state="resolved")
    assert body["reviews"][0]["resolution"] == "dismiss"
    assert body["reviews"][0]["resolved_by"] == "ana"


def test_a_webhook_records_page_leads_to_the_event_and_offers_no_release(
        app, ana, operator, shop, sink):
    failed_once(app, app.test_client(), shop, sink)
    ana.get("/ui/record", scope="hook:shop", key="evt_1")
    assert 'href="/ui/hooks/event?source=shop&amp;event_id=evt_1">Open the event' in ana.html
    assert "Mark succeeded" not in ana.html and 'value="release"' not in ana.html
    assert delivery(operator)["state"] == "failed"
    assert len(open_reviews(operator)) == 1
    # release (as POST /v1/resolve: 400) would let a resend of a queued event in again
    assert deliver(app.test_client(), shop, event_id="evt_2") == 202
    ana.get("/ui/record", scope="hook:shop", key="evt_2")
    assert 'value="release"' not in ana.html
    resp = ana.post("/ui/resolve", {"scope": "hook:shop", "key": "evt_2",
                                    "action": "release"})
    assert resp.status_code == 400 and "release is not for a webhook event" in ana.html
    status, body, _ = operator.get("/v1/keys", scope="hook:shop", key="evt_2")
    assert body["record"]["state"] == "in_progress"


def test_deliveries_filter_by_source_and_state_and_page(app, ana, operator, tokens, shop,
                                                        sink, clock):
    other = create_source(operator, tokens["ana"], sink.url, name="crm")
    client = app.test_client()
    for n in range(51):
        clock.advance(1)
        assert deliver(client, shop, json.dumps({"n": n}).encode(), f"s{n:02}") == 202
    assert deliver(client, other, BODY, "c1") == 202
    ana.get("/ui/hooks/deliveries", source="shop")
    # whole cells: a bare "c1" can turn up inside the page's random CSRF token
    assert ">s50<" in ana.html and ">s01<" in ana.html and ">c1<" not in ana.html
    assert ">s00<" not in ana.html  # the 51st, on the next page
    (older,) = re.findall(r'href="(/ui/hooks/deliveries\?[^"]*cursor=[^"]+)"', ana.html)
    ana.get(older.replace("&amp;", "&"))
    assert ">s00<" in ana.html and ">s50<" not in ana.html and "First page" in ana.html
    ana.get("/ui/hooks/deliveries", source="crm", state="queued")
    assert ">c1<" in ana.html and ">s00<" not in ana.html
    ana.get("/ui/hooks/deliveries", source="crm", state="failed")
    assert "No deliveries with these filters" in ana.html
    ana.get("/ui/hooks/deliveries", source="nobody")
    assert "No deliveries with these filters" in ana.html


def test_an_operator_sees_and_touches_only_their_own_tenants_webhooks(
        app, browser, operator, tokens, shop, sink):
    client = app.test_client()
    failed_once(app, client, shop, sink)
    assert deliver(client, shop, CHANGED) == 200  # held, on acme's evt_1
    gus = Http(client, tokens["gus"])
    theirs = create_source(gus, tokens["gus"], sink.url)  # globex's own "shop"
    assert deliver(client, theirs, b'{"globex": 1}', "evt_g") == 202
    browser.sign_in(tokens["gus"])
    for path in ("/ui/hooks", "/ui/hooks/deliveries", "/ui/hooks/deliveries?source=shop",
                 "/ui/hooks/deliveries?state=failed"):
        assert browser.get(path).status_code == 200, path
        assert "evt_1" not in browser.html and "HTTP 400" not in browser.html, path
    browser.get("/ui/hooks/deliveries")
    assert "evt_g" in browser.html
    assert browser.get("/ui/hooks/event", source="shop", event_id="evt_1").status_code == 404
    assert "9999" not in browser.html and "1250" not in browser.html
    (review_id,) = [r["id"] for r in open_reviews(operator, kind="delivery_failed")]
    browser.get("/ui/hooks")
    assert browser.post("/ui/hooks/redeliver", {"source": "shop", "event_id": "evt_1",
                                                "force": "true"}).status_code == 404
    for rid in [r["id"] for r in open_reviews(operator)]:
        assert browser.post("/ui/hooks/dismiss", {"source": "shop", "event_id": "evt_1",
                                                  "review_id": str(rid)}).status_code == 404
    assert delivery(operator)["state"] == "failed" and len(open_reviews(operator)) == 2
    assert review_id in [r["id"] for r in open_reviews(operator)]


def test_every_post_form_of_the_section_carries_the_csrf_token_and_needs_it(
        app, ana, operator, shop, sink):
    client = app.test_client()
    failed_once(app, client, shop, sink)
    deliver(client, shop, CHANGED)
    seen = 0
    for path in ("/ui/hooks", "/ui/hooks/deliveries?state=failed",
                 "/ui/hooks/event?source=shop&event_id=evt_1"):
        assert ana.get(path).status_code == 200, path
        for form in forms(ana.html):
            if form["method"] == "post":
                assert form["hidden"].get("csrf_token") == ana.csrf, (path, form["action"])
                seen += 1
    assert seen == 3 + 2 + 3 + 1  # sign-out on each page; Redeliver on the lists; the
    #                 event's Redeliver and its two reviews' Dismiss; the source's Pause
    reviews = open_reviews(operator)
    for path, form in (("/ui/hooks/redeliver", {"source": "shop", "event_id": "evt_1"}),
                       ("/ui/hooks/dismiss", {"source": "shop", "event_id": "evt_1",
                                              "review_id": str(reviews[0]["id"])})):
        for csrf in (None, "", "forged-" + "x" * 40):
            data = form if csrf is None else {**form, "csrf_token": csrf}
            resp = ana.post(path, data, csrf=False)
            assert resp.status_code == 400 and "security token" in ana.html, (path, csrf)
    assert delivery(operator)["state"] == "failed" and len(open_reviews(operator)) == 2


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_section_needs_a_signed_in_operator(browser):
    for path in ("/ui/hooks", "/ui/hooks/deliveries", "/ui/hooks/event?source=a&event_id=b"):
        resp = browser.get(path)
        assert resp.status_code == 303 and resp.headers["Location"].startswith("/ui/signin")
    for path in ("/ui/hooks/redeliver", "/ui/hooks/dismiss"):
        browser.get("/ui/signin")  # a form with this browser's CSRF token
        resp = browser.post(path, {"source": "a", "event_id": "b", "review_id": "1"})
        assert resp.status_code == 303 and "/ui/signin" in resp.headers["Location"]


def test_a_held_correction_goes_through_after_the_record_is_expired(app, ana, operator, shop,
                                                                    sink):
    """What the held event's hint says: expire the delivered event's record, resend."""
    client = app.test_client()
    assert deliver(client, shop) == 202 and pump(app) == ["delivered"]
    assert deliver(client, shop, CHANGED) == 200  # held
    ana.get("/ui/hooks/event", source="shop", event_id="evt_1")
    assert "expire the" in text(ana.html) and "have the provider send the event again" in \
        text(ana.html)
    ana.get("/ui/record", scope="hook:shop", key="evt_1")
    assert ana.post("/ui/expire", {"scope": "hook:shop", "key": "evt_1"}).status_code == 303
    assert deliver(client, shop, CHANGED) == 202  # the provider's resend: a new event
    assert open_reviews(operator) == []  # the held body's review: superseded
    assert pump(app) == ["delivered"]
    assert json.loads(sink.requests[1]["body"])["amount"] == 9999
