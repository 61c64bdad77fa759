"""Real providers through the ingest URL, on both backends: a Stripe-signed event (signed as
Stripe's SDK verifies), Slack's url_verification handshake, a Standard Webhooks sender with
its svix-* spelling, and a generic source without a signature whose id is JSON pointers."""
from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

from standardwebhooks import Webhook

from .support import SLACK_SECRET, STANDARD_SECRET, STRIPE_SECRET, count, make, now_seconds


def test_stripe(gw_app, gw, sink, clock):
    path = make(gw, sink, "stripe-in", "stripe", secrets=[STRIPE_SECRET])
    body = json.dumps({"id": "evt_1Q", "type": "invoice.paid", "pending_webhooks": 2}).encode()
    t = now_seconds(clock)
    sig = hmac.new(STRIPE_SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    headers = {"Stripe-Signature": f"t={t},v1={sig}", "Content-Type": "application/json"}
    r = gw.client.post(path, data=body, headers=headers)
    assert r.status_code == 202 and r.get_json()["event_id"] == "evt_1Q"
    # Stripe resends the same event with pending_webhooks moved: still a duplicate
    again = json.dumps({"id": "evt_1Q", "type": "invoice.paid", "pending_webhooks": 1}).encode()
    sig = hmac.new(STRIPE_SECRET.encode(), f"{t}.".encode() + again, hashlib.sha256).hexdigest()
    r = gw.client.post(path, data=again, headers={**headers,
                                                  "Stripe-Signature": f"t={t},v1={sig}"})
    assert r.get_json()["status"] == "duplicate"
    old = t - 301  # outside the 5-minute tolerance
    sig = hmac.new(STRIPE_SECRET.encode(), f"{old}.".encode() + body, hashlib.sha256).hexdigest()
    r = gw.client.post(path, data=body, headers={"Stripe-Signature": f"t={old},v1={sig}"})
    assert r.status_code == 401


def test_slack_handshake_answers_the_challenge_and_stores_nothing(gw_app, gw, sink, clock):
    path = make(gw, sink, "slack-in", "slack", secrets=[SLACK_SECRET])
    body = json.dumps({"type": "url_verification", "challenge": "3eZbrw1aB"}).encode()
    ts = str(now_seconds(clock))
    sig = "v0=" + hmac.new(SLACK_SECRET.encode(), f"v0:{ts}:".encode() + body,
                           hashlib.sha256).hexdigest()
    r = gw.client.post(path, data=body, headers={"X-Slack-Request-Timestamp": ts,
                                                 "X-Slack-Signature": sig})
    assert r.status_code == 200 and r.get_json() == {"challenge": "3eZbrw1aB"}
    from keystore_service.storage.tables import records
    assert count(gw_app, records) == 0


def test_standard_webhooks_with_the_svix_spelling(gw, sink, clock):
    path = make(gw, sink, "std-in", "standard", secrets=[STANDARD_SECRET])
    body = b'{"type":"user.created"}'
    ts = now_seconds(clock)
    signature = Webhook(STANDARD_SECRET).sign("msg_2Kq", datetime.fromtimestamp(ts, UTC),
                                              body.decode())
    for prefix in ("webhook", "svix"):
        r = gw.client.post(path, data=body, headers={
            f"{prefix}-id": "msg_2Kq", f"{prefix}-timestamp": str(ts),
            f"{prefix}-signature": "v1,bm90IGl0 " + signature})
        assert r.status_code in (200, 202) and r.get_json()["event_id"] == "msg_2Kq"


def test_generic_without_a_signature_takes_its_id_from_json_pointers(gw, sink):
    path = make(gw, sink, "timesheets", "generic", signature=None,
                event_id={"json": ["/project", "/week"]})
    body = json.dumps({"project": "acme", "week": "2026-W48", "hours": 31}).encode()
    r = gw.client.post(path, data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 202 and r.get_json()["event_id"] == "acme|2026-W48"
    r = gw.client.post(path, data=b"not json", headers={})
    assert r.status_code == 400
    status, body_, _ = gw.post("/v1/sources", {"name": "x", "provider": "generic",
                                               "secrets": ["s"], "signature": None,
                                               "event_id": {"header": "X-Id"},
                                               "destination": {"url": sink.url}})
    assert status == 400 and body_["error"]["details"]["field"] == "secrets"


def test_a_stripe_secret_of_the_wrong_shape_is_400(gw, sink):
    status, body, _ = gw.post("/v1/sources", {"name": "s", "provider": "stripe",
                                              "secrets": ["sk_live_nope"],
                                              "destination": {"url": sink.url}})
    assert status == 400 and body["error"]["details"]["field"] == "secrets.0"
