"""Every form and query value of every /ui view, sent with values at the edges of its type
(issue 13): the answer is a page, 400 where the value cannot be used, and never a 500. The
values go on the wire URL-encoded, as a browser or a tamperer sends them, so that bytes a
Python str cannot carry (a lone surrogate, invalid UTF-8) arrive as they would."""
from __future__ import annotations

import base64
import re
from urllib.parse import quote

import pytest

from .conftest import mismatch, stale
from .support import EDGES, SCOPE, assert_a_calm_page, open_reviews, query, record_url

# Each view's fields, and the valid values the others keep while one is probed.
GETS = {"/ui/": {"kind": "stale_lease", "scope": SCOPE, "cursor": ""},
        "/ui/record": {"scope": SCOPE, "key": "evt_1", "done": "dismiss"},
        "/ui/search": {"scope": SCOPE, "key": "evt_1"},
        "/ui/report": {"date": "2027-01-15"},
        "/ui/stuck": {"anything": "x"},
        "/ui/signin": {"next": "/ui/stuck", "reason": "idle"}}
POSTS = {"/ui/resolve": {"scope": SCOPE, "key": "evt_1", "action": "mark_failed",
                         "review_id": "1", "resource_id": "INV-1", "status_code": "201",
                         "body": "{}"},
         "/ui/expire": {"scope": SCOPE, "key": "nope"},
         "/ui/signin": {"token": "ks_wrong", "next": "/ui/"}}
@pytest.fixture
def signed_in(browser, acme, tokens):
    mismatch(acme, SCOPE, "evt_1")  # finished: a resolution's form is parsed, then refused
    browser.sign_in(tokens["ana"])
    browser.get("/ui/")
    return browser


def test_no_value_of_any_field_makes_a_server_error(signed_in, operator, acme):
    client = signed_in.client
    for path, fields in GETS.items():
        for name in fields:
            for label, edge in EDGES.items():
                resp = client.get(f"{path}?{query(fields, name, edge)}")
                assert_a_calm_page(resp, (path, name, label))
    for path, fields in POSTS.items():
        for name in [*fields, "csrf_token"]:
            for label, edge in EDGES.items():
                signed_in.get("/ui/")
                form = {**fields, "csrf_token": signed_in.csrf}
                resp = client.post(path, data=query(form, name, edge),
                                   content_type="application/x-www-form-urlencoded")
                assert_a_calm_page(resp, (path, name, label))
    assert len(open_reviews(operator)) == 1  # nothing was resolved
    status, body, _ = acme.get("/v1/keys", scope=SCOPE, key="evt_1")
    assert body["record"]["state"] == "succeeded"


def test_signed_out_any_query_is_carried_to_the_sign_in_page_or_dropped(browser):
    for label, edge in EDGES.items():
        resp = browser.client.get(f"/ui/report?date={edge}&x={edge}")
        assert resp.status_code == 303, label
        assert_a_calm_page(browser.client.get(resp.headers["Location"]), label)
    # bytes that are not UTF-8, sent unencoded (gunicorn refuses them; a WSGI server that
    # passes them on makes request.args raise)
    for path in ("/ui/", "/ui/signin", "/ui/report"):
        resp = browser.client.get(path, environ_overrides={"QUERY_STRING": "kind=\xff\xfe"})
        assert resp.status_code == 400, path
        assert_a_calm_page(resp, path)


NUMBERS = ["%C2%B2", "%D9%A2", "%EF%BC%91", "9223372036854775808", "9" * 40, "-1", "0",
           "1e3", "%2B5", "5.0", "1_0", "%00", "a%0D%0Ab"]


def test_review_id_and_status_code_are_ascii_whole_numbers(signed_in, acme, clock, operator):
    stale(acme, clock, "sync", "c-1")
    (review,) = [r for r in open_reviews(operator) if r["key"] == "c-1"]
    form = {"scope": "sync", "key": "c-1", "action": "mark_succeeded",
            "review_id": str(review["id"]), "status_code": "201"}
    for name in ("review_id", "status_code"):
        for edge in NUMBERS:
            signed_in.get(record_url("c-1", "sync"))
            resp = signed_in.client.post("/ui/resolve", data=query(
                {**form, "csrf_token": signed_in.csrf}, name, edge),
                content_type="application/x-www-form-urlencoded")
            html = " ".join(resp.get_data(as_text=True).split())
            assert resp.status_code == 400, (name, edge)
            assert "Nothing was changed" in html, (name, edge)
    assert [r["key"] for r in open_reviews(operator)].count("c-1") == 1
    signed_in.get(record_url("c-1", "sync"))
    assert signed_in.post("/ui/resolve", form).status_code == 303  # the real values work


def b64(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def test_a_tampered_cursor_is_a_400_page(signed_in):
    for raw in ("[1e27, 2]", "[1000000000000000000000000000, 2]", "[9223372036854775808, 1]",
                "[true, 1]", "[1, 2, 3]", "[1,2]"):
        resp = signed_in.get("/ui/", cursor=b64(raw))
        assert resp.status_code == 400, raw
        assert "not one this service gave out" in signed_in.html
    for cursor in ("garbage", "A" * 5000, "%ED%A0%80"):
        assert signed_in.get("/ui/", cursor=cursor).status_code == 400, cursor
    assert signed_in.get("/ui/", cursor=b64("[0, 0]")).status_code == 200


def test_the_report_page_takes_a_day_in_range_only(signed_in):
    for day in ("0", "9999-12-31", "0001-01-01", "0001-01-13", "1969-12-31", "2027-02-30",
                "2027-1-5", "20270115", "٢٠٢٧-٠١-١٥", "2027-01-15T00:00", "x" * 5000):
        resp = signed_in.get("/ui/report", date=day)
        assert resp.status_code == 400, day
        assert re.search("YYYY-MM-DD|from 1970-01-01 to 9999-12-30|not a day of the calendar",
                         signed_in.html), day
    for day in ("1970-01-01", "9999-12-30"):
        assert signed_in.get("/ui/report", date=day).status_code == 200, day
        assert f"Figures for {day}" in signed_in.html
    signed_in.get("/ui/report", date="1970-01-01")
    assert "1969-12-19: 0" in signed_in.html  # the chart's 14 days reach before the epoch
    signed_in.get("/ui/report")
    assert 'min="1970-01-01"' in signed_in.html and 'max="2027-01-15"' in signed_in.html


UNSAFE_NEXT = ["/ui/\r\nSet-Cookie: x=1", "/ui/\n", "/ui/\x00", "/ui/\u2028", "/ui/é",
               "/ui/" + "a" * 5000, "/ui/../v1/keys", "/ui/%2e%2e/v1/keys", "/ui/ x",
               "/ui//evil.example", "/ui/\\evil", "//evil.example/ui/", "/ui/record\t"]


def test_an_unsafe_next_is_dropped_for_the_queue(browser, tokens):
    browser.get("/ui/signin")
    for target in UNSAFE_NEXT:
        resp = browser.post("/ui/signin", {"token": tokens["ana"], "next": target})
        assert (resp.status_code, resp.headers["Location"]) == (303, "/ui/"), repr(target)
        resp = browser.get("/ui/signin", next=target)  # signed in: straight on
        assert (resp.status_code, resp.headers["Location"]) == (303, "/ui/"), repr(target)
        browser.get("/ui/")
        browser.post("/ui/signout")
        browser.get("/ui/signin", next=target)  # signed out: the form does not carry it
        assert 'name="next"' not in browser.html, repr(target)
    for target in ("/ui/stuck", "/ui/record?scope=s&key=a%20b", "/ui/report?date=2027-01-15"):
        browser.get("/ui/signin", next=target)
        assert f'name="next" value="{target.replace("&", "&amp;")}"' in browser.html
        resp = browser.post("/ui/signin", {"token": tokens["ana"], "next": target})
        assert resp.headers["Location"] == target
        browser.get("/ui/")
        browser.post("/ui/signout")


def test_a_key_is_escaped_in_the_page_log(signed_in, acme, caplog):
    """A key may hold characters that are not control characters but still break a log
    line for a reader (U+2028 LINE SEPARATOR, U+202E RIGHT-TO-LEFT OVERRIDE)."""
    key = "evt\u2028forged line\u202e"
    status, body, _ = acme.post("/v1/claim", {"scope": SCOPE, "key": key})
    acme.post("/v1/complete", {"scope": SCOPE, "key": key, "lease_token": body["lease_token"],
                               "state": "succeeded"})
    signed_in.get(record_url(quote(key, safe="")))
    with caplog.at_level("INFO", logger="keystore.ui"):
        assert signed_in.post("/ui/expire", {"scope": SCOPE, "key": key}).status_code == 303
    (line,) = [r.getMessage() for r in caplog.records if "expired" in r.getMessage()]
    assert "\u2028" not in line and "\u202e" not in line and "evt\\u2028forged" in line
