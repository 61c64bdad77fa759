"""The operators' query strings over HTTP, on both backends (issue 13): a review cursor is
exactly one the service gave out, a report date is a YYYY-MM-DD day the report can count,
and /openapi.json describes both, so that nothing a client sends answers 500."""
from __future__ import annotations

import base64
import re

import pytest

from keystore_service.web.api import openapi
from tests.support import Http

from .support import BAD_DATES, acquire, complete, mismatch


@pytest.fixture
def op(http, tokens):
    return Http(http.client, tokens["acme_operator"])


def b64(raw: str) -> str:
    """A cursor-shaped string around any JSON text (as a tamperer would make one)."""
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


# JSON texts a tamperer may wrap as a cursor: out of range, not integers, bool is not int,
# the wrong shape, and a right value written otherwise than the service writes it.
TAMPERED_JSON = ["[1e27, 2]", "[1000000000000000000000000000, 2]", "[9223372036854775808, 1]",
                 "[1, 9223372036854775808]", "[-9223372036854775809, 1]", "[-1, 1]",
                 "[1, -1]", "[true, 1]", "[1, false]", "[null, 1]", "[1.0, 2]", "[NaN, 1]",
                 "[Infinity, 1]", '["1", 2]', "[1, 2, 3]", "[1]", "[]", "{}", "null", "1",
                 "[[1], 2]", "[1,2]", " [1, 2]", "[01, 2]", "[1, 2]\n"]
# Strings that are not a cursor's shape at all.
MALFORMED = ["garbage", "", "=", "AAAA====", "a+b/c+d/e", "W1sgMl0", "Ａ" * 12,
             "A" * 57, "A" * 5000, "\x00" * 8, "W1swLCAwXQ%0A", "W1swLCAwXQ\r\n"]


def test_a_tampered_cursor_is_a_400_never_a_500(http, op):
    complete(http, acquire(http))
    mismatch(http)
    for raw in TAMPERED_JSON:
        status, body, _ = op.get("/v1/reviews", cursor=b64(raw))
        assert (status, body["error"]["code"]) == (400, "invalid_request"), raw
    for cursor in MALFORMED:
        status, body, _ = op.get("/v1/reviews", cursor=cursor)
        assert (status, body["error"]["code"]) == (400, "invalid_request"), cursor
    # the edges of a real cursor's range still page: nothing is newer than the largest
    for raw in ("[0, 0]", "[9223372036854775807, 9223372036854775807]"):
        status, body, _ = op.get("/v1/reviews", cursor=b64(raw))
        assert status == 200, (raw, body)
    assert op.get("/v1/reviews", cursor=b64("[0, 0]"))[1]["reviews"] != []
    assert op.get("/v1/reviews", cursor=b64("[9223372036854775807, 1]"))[1]["reviews"] == []


def test_the_cursors_the_service_gives_out_fit_the_published_shape(http, op, clock):
    schema = query_schema("/v1/reviews", "cursor")
    for n in range(3):  # three mismatches, a second apart
        ref = {"scope": "s", "key": f"k{n}"}
        lease = http.post("/v1/claim", {**ref, "payload": 1})[1]["lease_token"]
        http.post("/v1/complete", {**ref, "lease_token": lease, "state": "succeeded"})
        assert http.post("/v1/claim", {**ref, "payload": 2})[0] == 422
        clock.advance(1)
    cursor, keys = None, []
    while True:
        status, body, _ = op.get("/v1/reviews", limit="1",
                                 **({"cursor": cursor} if cursor else {}))
        assert status == 200, body
        keys += [r["key"] for r in body["reviews"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
        assert re.fullmatch(schema["pattern"], cursor), cursor
        assert schema["minLength"] <= len(cursor) <= schema["maxLength"]
    assert keys == ["k0", "k1", "k2"]


def query_schema(path: str, name: str) -> dict:
    (param,) = [p for p in openapi.document()["paths"][path]["get"]["parameters"]
                if p["name"] == name]
    return param["schema"]


def test_openapi_describes_the_cursor_and_the_report_date():
    cursor = query_schema("/v1/reviews", "cursor")
    assert cursor["type"] == "string" and cursor["maxLength"] == 56
    assert re.fullmatch(cursor["pattern"], "W1swLCAwXQ")
    assert not re.fullmatch(cursor["pattern"], "a+b/c=")
    day = query_schema("/v1/report", "date")
    assert (day["type"], day["format"]) == ("string", "date")
    pattern = re.compile(day["pattern"])
    for good in ("1970-01-01", "2027-01-15", "9999-12-30"):
        assert pattern.fullmatch(good), good
    for bad in ("0", "1969-12-31", "0001-01-01", "9999-12-31", "2027-1-15", "20270115",
                "٢٠٢٧-01-15", "2027-01-15T00:00:00"):
        assert not pattern.fullmatch(bad), bad


def test_a_report_date_is_strictly_a_day_in_range(http, op):
    complete(http, acquire(http))
    for day in BAD_DATES:
        status, body, _ = op.get("/v1/report", date=day)
        assert (status, body["error"]["code"]) == (400, "invalid_request"), day
        assert body["error"]["details"]["errors"][0]["field"] == "date", day
    for day in ("1970-01-01", "2027-01-15", "9999-12-30"):
        status, body, _ = op.get("/v1/report", date=day)
        assert (status, body["date"]) == (200, day), body
    assert op.get("/v1/report", date="2027-01-15")[1]["scopes"][0]["claimed"] == 1
    assert op.get("/v1/report")[0] == 400  # the date is required


def test_query_integers_are_ascii_digits(op):
    for field, value in (("limit", "٢"), ("limit", "+5"), ("limit", "5.0"), ("limit", " 5"),
                         ("limit", "1_0"), ("limit", "9" * 40), ("min_age_seconds", "-0"),
                         ("min_age_seconds", "1e3"), ("min_age_seconds", "²")):
        status, body, _ = op.get("/v1/reviews", **{field: value})
        assert (status, body["error"]["code"]) == (400, "invalid_request"), (field, value)
    assert op.get("/v1/reviews", limit="500", min_age_seconds="0")[0] == 200
