"""Event ids in the forward's headers (issue 25, item 7), on both backends, through a real
sink: an id outside Latin-1 (`東京|48`) was accepted and then never forwarded (every attempt
failed with UnicodeEncodeError until the window ended). Idempotency-Key and webhook-id carry
the id percent-encoded (UTF-8; every byte outside printable ASCII, space and `%`), the
Standard Webhooks signature is over the id as sent, and the record keeps the id as accepted.
"""
from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from urllib.parse import unquote

import pytest
from standardwebhooks import Webhook

from keystore_service.gateway import rules

from .support import pump

FORWARD_SECRET = "whsec_" + base64.b64encode(b"f" * 32).decode()


def generic(gw, sink) -> str:
    status, body, _ = gw.post("/v1/sources", {
        "name": "timesheets", "provider": "generic", "signature": None,
        "event_id": {"json": ["/project", "/week"]},
        "destination": {"url": sink.url, "secret": FORWARD_SECRET}})
    assert status == 201, body
    return "/hooks/" + body["source"]["ingest_url"].rsplit("/", 1)[1]


@pytest.mark.parametrize("project,sent", [
    ("東京", "%E6%9D%B1%E4%BA%AC|48"),
    ("Zürich 50%", "Z%C3%BCrich%2050%2525|48"),  # the id is "Zürich 50%25|48" (its part's %)
    ("a\r\nX-Injected: 1", "a%250D%250AX-Injected:%201|48"),  # CR/LF: never a header
    ("😀\u202e", "%F0%9F%98%80%E2%80%AE|48"),
])
def test_ids_outside_printable_ascii_are_forwarded_percent_encoded(gw, sink, forwarding,
                                                                    project, sent):
    path = generic(gw, sink)
    body = json.dumps({"project": project, "week": 48}).encode()
    r = gw.client.post(path, data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 202, r.get_json()
    event_id = r.get_json()["event_id"]  # as accepted, and as the record keeps it
    assert pump(forwarding) == ["delivered"]
    (got,) = sink.requests
    h = got["headers"]
    assert h["Idempotency-Key"] == sent and h["webhook-id"] == sent
    assert unquote(sent) == event_id  # what a workflow's guard gets back by decoding once
    assert "X-Injected" not in h
    # signed as the Standard Webhooks library signs "<webhook-id>.<timestamp>.<body>" (its
    # verify() would also check the timestamp against the wall clock: the test's is fixed)
    at = datetime.fromtimestamp(int(h["webhook-timestamp"]), UTC)
    assert h["webhook-signature"] == Webhook(FORWARD_SECRET).sign(sent, at,
                                                                  got["body"].decode())
    status, found, _ = gw.get("/v1/keys", scope="hook:timesheets", key=event_id)
    assert status == 200 and found["record"]["state"] == "succeeded"
    status, page, _ = gw.get("/v1/deliveries", event_id=event_id)
    assert [d["event_id"] for d in page["deliveries"]] == [event_id]
    assert page["deliveries"][0]["state"] == "delivered"


def test_a_plain_id_is_forwarded_as_it_is():
    for plain in ("evt_1QhN2x", "8c2b6f3e-5d1a-11ef-8e4a-0242ac120002", "acme|2026-W48",
                  "a!~\"'()*+,-./:;<=>?@[\\]^_`{}"):
        assert rules.header_id(plain) == plain


def test_every_id_becomes_one_printable_ascii_header_value():
    for tricky in ("\r\n", "\x00", "\x7f", " lead", "trail ", "%", "%25", "\ud800", "é" * 200):
        sent = rules.header_id(tricky)
        assert sent.isascii() and sent.isprintable() and " " not in sent
        assert unquote(sent, errors="surrogatepass") == tricky
    assert rules.header_id("a b") != rules.header_id("a  b")  # spaces are never merged
