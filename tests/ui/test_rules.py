"""The operators' page's rules through Flask's test client, on both backends: signing in,
the cookie, CSRF on every form, idle sign-out, tenant isolation, and errors as pages.
The browser tests (test_browser.py) show the same flows in a real Chromium."""
from __future__ import annotations

import hashlib
import json
import re
import sqlite3

import pytest
from itsdangerous import URLSafeSerializer
from prometheus_client.parser import text_string_to_metric_families

from tests.support import Http

from .conftest import Browser, mismatch, stale
from .support import SCOPE, forms, open_reviews, record_url

# Rules that do not depend on the database run on SQLite alone (the page's queries and
# every resolution path run on both backends below).
sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def cookie_header(resp) -> str:
    (header,) = [h for h in resp.headers.getlist("Set-Cookie") if h.startswith("keystore_ui=")]
    return header


# --- signing in ----------------------------------------------------------------------------

@sqlite_only
def test_signed_out_every_page_leads_to_the_sign_in_form(browser):
    for path in ("/ui/", "/ui/stuck", "/ui/report", "/ui/search", record_url("k")):
        resp = browser.get(path)
        assert resp.status_code == 303
        assert resp.headers["Location"].startswith("/ui/signin")
    resp = browser.get("/ui/signin")
    assert resp.status_code == 200 and 'name="token"' in browser.html and browser.csrf


@sqlite_only
def test_an_operator_signs_in_with_a_strict_cookie_that_holds_no_token(browser, tokens):
    resp = browser.sign_in(tokens["ana"])
    assert (resp.status_code, resp.headers["Location"]) == (303, "/ui/")
    header = cookie_header(resp)
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Path=/ui" in header
    assert "Secure" not in header  # plain http here
    value = header.split(";")[0].split("=", 1)[1]
    payload = URLSafeSerializer("any").load_payload(value.rsplit(".", 1)[0].encode())
    assert payload["token_name"] == "ana" and payload["tenant"] == "acme"
    for secret in (tokens["ana"], hashlib.sha256(tokens["ana"].encode()).hexdigest()):
        assert secret not in value and secret not in json.dumps(payload)
    resp = browser.get("/ui/")
    assert resp.status_code == 200 and "Review queue" in browser.html and "ana" in browser.html


@sqlite_only
def test_the_cookie_is_secure_over_https(app, tokens):
    https = Browser(app.test_client(), base_url="https://localhost")
    https.get("/ui/signin")
    assert "Secure" in cookie_header(https.post("/ui/signin", {"token": tokens["ana"]}))


def test_wrong_and_client_tokens_cannot_sign_in(browser, tokens):
    for token, status, words in ((tokens["acme"], 403, "client token"),
                                 ("ks_not-a-token", 401, "not accepted"),
                                 ("", 401, "not accepted")):
        resp = browser.sign_in(token)
        assert resp.status_code == status and words in browser.html
        assert resp.mimetype == "text/html" and "Traceback" not in browser.html
        assert token == "" or token not in browser.html
        assert browser.get("/ui/").status_code == 303  # still signed out


@sqlite_only
def test_after_sign_in_only_a_page_of_the_ui_is_followed(browser, tokens):
    browser.get("/ui/signin")
    for target, lands in (("/ui/stuck", "/ui/stuck"), ("//evil.example/ui/", "/ui/"),
                          ("https://evil.example/", "/ui/"), ("/v1/keys", "/ui/")):
        resp = browser.post("/ui/signin", {"token": tokens["ana"], "next": target})
        assert resp.headers["Location"] == lands
        browser.post("/ui/signout")


@sqlite_only
def test_sign_out_ends_the_session(browser, tokens):
    browser.sign_in(tokens["ana"])
    browser.get("/ui/")
    resp = browser.post("/ui/signout")
    assert resp.status_code == 303 and "reason=signed_out" in resp.headers["Location"]
    assert browser.get("/ui/").status_code == 303


def test_a_revoked_token_ends_its_sessions(app, browser, tokens, clock):
    browser.sign_in(tokens["ana"])
    assert browser.get("/ui/").status_code == 200
    app.extensions["keystore"].accounts.revoke_token("acme", "ana", clock())
    resp = browser.get("/ui/")
    assert resp.status_code == 303 and "reason=revoked" in resp.headers["Location"]
    browser.get(resp.headers["Location"])
    assert "revoked" in browser.html


# --- CSRF ----------------------------------------------------------------------------------

def test_every_post_form_on_every_page_carries_the_session_csrf_token(browser, acme, clock,
                                                                      tokens):
    mismatch(acme, SCOPE, "evt_1")
    stale(acme, clock, "sync", "c-1")
    browser.sign_in(tokens["ana"])
    pages = ["/ui/", "/ui/stuck", "/ui/report", "/ui/search?scope=sync", record_url("evt_1"),
             record_url("c-1", "sync")]
    seen = 0
    for path in pages:
        assert browser.get(path).status_code == 200, path
        token = browser.csrf
        for form in forms(browser.html):
            if form["method"] == "post":
                assert form["hidden"].get("csrf_token") == token, (path, form["action"])
                seen += 1
    assert seen >= 2 + 6 + 3  # sign-out on each page, and the record pages' buttons


@sqlite_only
def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(browser, acme, operator,
                                                                      tokens):
    mismatch(acme, SCOPE, "evt_1")
    browser.sign_in(tokens["ana"])
    form = {"scope": SCOPE, "key": "evt_1", "action": "dismiss", "token": tokens["ana"]}
    for path in ("/ui/signin", "/ui/signout", "/ui/resolve", "/ui/expire"):
        for csrf in (None, "", "forged-" + "x" * 40):
            data = form if csrf is None else {**form, "csrf_token": csrf}
            resp = browser.post(path, data, csrf=False)
            assert resp.status_code == 400 and resp.mimetype == "text/html", (path, csrf)
            assert "security token" in browser.html and "Nothing was changed" in browser.html
    assert len(open_reviews(operator)) == 1
    status, body, _ = acme.get("/v1/keys", scope=SCOPE, key="evt_1")
    assert body["record"]["expires_at"] > "2027-01-15T08:00:00Z"  # not expired
    assert browser.get("/ui/").status_code == 200  # still signed in


@sqlite_only
def test_the_csrf_token_of_another_session_does_not_pass(app, browser, acme, tokens):
    mismatch(acme, SCOPE, "evt_1")
    other = Browser(app.test_client())
    other.sign_in(tokens["ana"])
    other.get("/ui/")
    browser.sign_in(tokens["ana"])
    resp = browser.post("/ui/resolve", {"scope": SCOPE, "key": "evt_1", "action": "dismiss",
                                        "csrf_token": other.csrf}, csrf=False)
    assert resp.status_code == 400


# --- idle time -----------------------------------------------------------------------------

@sqlite_only
def test_idle_sign_out_after_the_setting_and_activity_keeps_the_session(browser, acme, operator,
                                                                        tokens, clock):
    mismatch(acme, SCOPE, "evt_1")
    browser.sign_in(tokens["ana"])
    for _ in range(3):  # each request counts as activity: 14 min apart, 42 min in all
        clock.advance(14 * 60)
        assert browser.get("/ui/").status_code == 200
    browser.get(record_url("evt_1"))
    clock.advance(15 * 60 + 1)
    # the record page's form, sent after the idle time: the sign-in page, nothing changed
    resp = browser.post("/ui/resolve", {"scope": SCOPE, "key": "evt_1", "action": "dismiss"})
    assert resp.status_code == 303 and "reason=idle" in resp.headers["Location"]
    browser.get(resp.headers["Location"])
    assert "signed out after 15 min without activity" in browser.html
    assert browser.get(record_url("evt_1")).status_code == 303
    assert len(open_reviews(operator)) == 1


@sqlite_only
def test_a_session_ends_after_twelve_hours_however_busy(browser, tokens, clock):
    browser.sign_in(tokens["ana"])
    for _ in range(12 * 4):
        clock.advance(15 * 60 - 1)
        assert browser.get("/ui/stuck").status_code == 200
    clock.advance(15 * 60 - 1)
    resp = browser.get("/ui/stuck")
    assert resp.status_code == 303 and "reason=limit" in resp.headers["Location"]


# --- tenants -------------------------------------------------------------------------------

def test_an_operator_sees_and_touches_only_their_own_tenant(browser, acme, globex, operator,
                                                            tokens, clock):
    refused = mismatch(acme, "acme_billing", "evt_acme")["record"]
    stale(acme, clock, "acme_sync", "c-acme")
    mismatch(acme, SCOPE, "evt_shared")
    mismatch(globex, SCOPE, "evt_shared", amount=7)
    acme_only = ["evt_acme", "c-acme", "acme_sync", "INV-evt_acme", "INV-c-acme",
                 "invoice_created", refused["fingerprint"],
                 *refused["review"]["refused_fingerprints"]]
    browser.sign_in(tokens["gus"])  # globex's operator
    for path in ("/ui/", "/ui/stuck", "/ui/report", "/ui/search?scope=acme_billing",
                 "/ui/?scope=acme_billing", "/ui/report?date=2027-01-15"):
        assert browser.get(path).status_code == 200, path
        for word in acme_only:
            assert word not in browser.html, (path, word)
    browser.get("/ui/search?scope=acme_billing")
    assert "No records in scope" in browser.html
    for path in (record_url("evt_acme", "acme_billing"), record_url("c-acme", "acme_sync"),
                 "/ui/search?scope=acme_billing&key=evt_acme"):
        assert browser.get(path).status_code == 404, path
        for word in acme_only[3:]:
            assert word not in browser.html, (path, word)
    browser.get("/ui/")
    assert "evt_shared" in browser.html  # globex's own item
    # acting on another tenant's record is "not found", and changes nothing there
    for action in ("dismiss", "mark_failed"):
        resp = browser.post("/ui/resolve", {"scope": "acme_billing", "key": "evt_acme",
                                            "action": action})
        assert resp.status_code == 404
    assert browser.post("/ui/expire", {"scope": "acme_sync", "key": "c-acme"}).status_code \
        == 404
    # the same scope and key in both tenants: globex's decision is globex's alone
    browser.get(record_url("evt_shared"))
    assert browser.post("/ui/resolve", {"scope": SCOPE, "key": "evt_shared",
                                        "action": "dismiss"}).status_code == 303
    assert sorted(r["key"] for r in open_reviews(operator)) == ["c-acme", "evt_acme",
                                                                "evt_shared"]
    assert open_reviews(Http(acme.client, tokens["gus"])) == []


# --- resolving -----------------------------------------------------------------------------

def test_mark_succeeded_with_a_result_settles_the_record_and_writes_the_audit_row(
        browser, acme, operator, tokens, clock):
    lease = stale(acme, clock, "sync", "c-1")
    browser.sign_in(tokens["ana"])
    browser.get(record_url("c-1", "sync"))
    assert "invoice_created" in browser.html and "INV-c-1" in browser.html  # the checkpoint
    (review,) = open_reviews(operator)
    resp = browser.post("/ui/resolve", {
        "scope": "sync", "key": "c-1", "review_id": str(review["id"]), "action":
        "mark_succeeded", "resource_id": "INV-c-1", "status_code": "201",
        "body": '{"invoice": "INV-c-1", "total": 12.5}'})
    assert resp.status_code == 303
    browser.get(resp.headers["Location"])
    assert "Marked succeeded." in browser.html and "Needs a decision" not in browser.html
    audit = browser.html.split('id="audit-h"')[1]
    assert "mark succeeded</strong> by <strong>ana" in audit
    assert "needs_reconciliation" in audit and "succeeded" in audit
    status, body, _ = acme.get("/v1/keys", scope="sync", key="c-1")
    assert body["record"]["state"] == "succeeded" and body["record"]["review"] is None
    assert body["record"]["result"] == {"resource_id": "INV-c-1", "status_code": 201,
                                        "body": {"invoice": "INV-c-1", "total": 12.5}}
    for secret in (lease, hashlib.sha256(lease.encode()).hexdigest(), tokens["ana"],
                   tokens["acme"]):
        assert secret not in browser.html  # never a token or a lease token's hash


BAD_RESULTS = [({"body": "{not json"}, "not valid JSON"),
               ({"body": '1, "more": 2'}, "single JSON value"),
               ({"body": "NaN"}, "not valid JSON"),
               ({"status_code": "abc"}, "whole number"),
               ({"status_code": "700"}, "status code"),
               ({"resource_id": "x" * 300}, "resource id")]


@sqlite_only
def test_a_result_that_cannot_be_stored_is_refused_calmly(browser, acme, operator, tokens,
                                                          clock):
    stale(acme, clock, "sync", "c-1")
    browser.sign_in(tokens["ana"])
    for fields, words in BAD_RESULTS:
        browser.get(record_url("c-1", "sync"))
        resp = browser.post("/ui/resolve", {"scope": "sync", "key": "c-1",
                                            "action": "mark_succeeded", **fields})
        assert resp.status_code == 400 and words in browser.html, fields
        assert "Nothing was changed" in browser.html and "Traceback" not in browser.html
        assert 'href="/ui/record?scope=sync&amp;key=c-1"' in browser.html  # the way back
    assert len(open_reviews(operator)) == 1


def test_dismiss_then_expire_lets_a_corrected_resend_through(browser, acme, tokens):
    mismatch(acme, SCOPE, "evt_1")
    browser.sign_in(tokens["ana"])
    browser.get(record_url("evt_1"))
    assert "only dismiss applies here" in browser.html and "Mark succeeded" not in browser.html
    browser.post("/ui/resolve", {"scope": SCOPE, "key": "evt_1", "action": "dismiss"})
    browser.get(record_url("evt_1"))
    assert "Dismissed" not in browser.html  # the done notice is only on the redirect target
    assert "dismiss</strong> by <strong>ana" in browser.html
    assert "open review</th>" in browser.html.split('id="audit-h"')[1]  # 1 -> none
    resp = browser.post("/ui/expire", {"scope": SCOPE, "key": "evt_1"})
    browser.get(resp.headers["Location"])
    assert "Expired: the next claim" in browser.html and "state-expired" in browser.html
    status, body, _ = acme.post("/v1/claim", {"scope": SCOPE, "key": "evt_1",
                                              "payload": {"amount": 101}})
    assert (status, body["outcome"], body["record"]["attempt"]) == (201, "acquired", 1)


# --- errors and the page's own rules -------------------------------------------------------

def test_errors_are_calm_pages_never_traces(browser, acme, tokens):
    mismatch(acme, SCOPE, "evt_1")
    status, body, _ = acme.post("/v1/claim", {"scope": SCOPE, "key": "held", "lease_seconds": 600})
    browser.sign_in(tokens["ana"])
    cases = [("get", "/ui/nope", {}, 404, "no page at this address"),
             ("get", "/ui/resolve", {}, 405, "does not take that kind of request"),
             ("get", "/ui/record", {"scope": "bad scope!", "key": "k"}, 400, "scope"),
             ("get", "/ui/report", {"date": "yesterday"}, 400, "yyyy-mm-dd"),
             ("get", "/ui/", {"kind": "other"}, 400, "kind is"),
             ("post", "/ui/resolve", {"scope": SCOPE, "key": "evt_1",
                                      "action": "mark_succeeded"}, 409, "already finished"),
             ("post", "/ui/resolve", {"scope": SCOPE, "key": "evt_1", "action": "explode"},
              400, "choose one of the buttons"),
             ("post", "/ui/resolve", {"scope": SCOPE, "key": "nope", "action": "dismiss"},
              404, "no such record"),
             ("post", "/ui/expire", {"scope": SCOPE, "key": "held"}, 409, "live lease")]
    for method, path, data, status, words in cases:
        browser.get("/ui/")
        resp = browser.get(path, **data) if method == "get" else browser.post(path, data)
        assert (resp.status_code, resp.mimetype) == (status, "text/html"), (path, data)
        assert words in " ".join(browser.html.split()).lower(), (path, words)
        assert "Traceback" not in browser.html and '"error"' not in browser.html


@sqlite_only
def test_a_form_larger_than_the_service_accepts_is_a_page(browser, tokens):
    browser.sign_in(tokens["ana"])
    browser.get("/ui/")
    resp = browser.post("/ui/resolve", {"scope": SCOPE, "key": "k", "action": "dismiss",
                                        "body": "x" * (2 * 1024 * 1024)})
    assert (resp.status_code, resp.mimetype) == (413, "text/html")
    assert "more than this service accepts" in browser.html


@sqlite_only
@pytest.mark.parametrize("ui_settings", [{"sqlite_busy_timeout_ms": 0}], indirect=True)
def test_a_database_that_does_not_answer_is_a_503_page_and_changes_nothing(
        app, browser, acme, operator, tokens, database_url):
    """SQLite busy with another writer (and no busy timeout): the resolution cannot start."""
    mismatch(acme, SCOPE, "evt_1")
    browser.sign_in(tokens["ana"])
    browser.get(record_url("evt_1"))
    errors_before = database_errors(browser.client)
    writer = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # holds the write lock; readers go on (WAL)
        resp = browser.post("/ui/resolve", {"scope": SCOPE, "key": "evt_1",
                                            "action": "dismiss"})
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert (resp.status_code, resp.mimetype) == (503, "text/html")
    assert "database did not answer" in browser.html and "Nothing was changed" in browser.html
    assert len(open_reviews(operator)) == 1
    assert database_errors(browser.client) == errors_before + 1


def database_errors(client) -> float:
    """keystore_database_errors_total{kind="unavailable"} now (counters are per process)."""
    for family in text_string_to_metric_families(client.get("/metrics").get_data(as_text=True)):
        for sample in family.samples:
            if sample.name == "keystore_database_errors_total" and \
                    sample.labels == {"kind": "unavailable"}:
                return sample.value
    return 0.0


@sqlite_only
def test_an_unexpected_error_is_a_page_without_a_trace(app, browser, acme, tokens):
    mismatch(acme, SCOPE, "evt_1")
    browser.sign_in(tokens["ana"])
    with app.extensions["keystore"].database.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE resolutions")  # a bug's stand-in: the query fails
    resp = browser.get(record_url("evt_1"))
    assert (resp.status_code, resp.mimetype) == (500, "text/html")
    assert "could not be shown" in browser.html
    assert "Traceback" not in browser.html and "resolutions" not in browser.html


@sqlite_only
def test_pages_send_protective_headers_and_use_only_their_own_assets(browser, tokens):
    browser.sign_in(tokens["ana"])
    resp = browser.get("/ui/")
    assert resp.headers["Cache-Control"] == "no-store"
    assert "default-src 'none'" in resp.headers["Content-Security-Policy"]
    assert resp.headers["X-Frame-Options"] == "DENY"
    assets = re.findall(r'(?:href|src)="([^"]+)"', browser.html)
    assert assets and all(a.startswith(("/ui/", "#")) for a in assets), assets
    for name in ("ui.css", "favicon.svg"):
        r = browser.client.get(f"/ui/static/{name}")
        assert r.status_code == 200
        assert not re.search(rb"url\(|@import|https?://(?!www\.w3\.org/2000/svg)", r.data)


def test_the_report_page_draws_the_days_duplicates(browser, acme, tokens, clock):
    for n in range(3):
        status, body, _ = acme.post("/v1/claim", {"scope": "hooks", "key": f"e{n}"})
        acme.post("/v1/complete", {"scope": "hooks", "key": f"e{n}",
                                   "lease_token": body["lease_token"], "state": "succeeded"})
        for _ in range(n + 1):
            acme.post("/v1/claim", {"scope": "hooks", "key": f"e{n}"})  # replays
    browser.sign_in(tokens["ana"])
    browser.get("/ui/report")
    assert "Figures for 2027-01-15" in browser.html
    assert '<span class="value">6</span><span class="label">Duplicates suppressed' in \
        browser.html
    assert browser.html.count('<rect class="bar') == 1  # one day with duplicates
    assert "2027-01-15: 6" in browser.html and "2027-01-02: 0" in browser.html
    browser.get("/ui/report", date="2027-01-10")
    assert browser.html.count('<rect class="bar') == 0 and "Nothing was claimed" in browser.html
