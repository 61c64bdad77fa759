"""Event types through the ingest URL on both backends: each provider's delivery records its
type, GET /v1/deliveries shows it and filters by a glob, a generic source's rule is an option
of the source, and a type the rules refuse (too long, control characters) is recorded as none
with the event still accepted."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime

from standardwebhooks import Webhook

from .support import SLACK_SECRET, STANDARD_SECRET, STRIPE_SECRET, make, now_seconds

GITHUB_SECRET = SHOPIFY_SECRET = "shared-secret"


def _mac(secret: str, message: bytes) -> bytes:
    return hmac.new(secret.encode(), message, hashlib.sha256).digest()


def deliver_each(gw, sink, clock) -> None:
    """One signed delivery from each provider, each of its own type."""
    t = now_seconds(clock)
    path = make(gw, sink, "stripe", "stripe", secrets=[STRIPE_SECRET])
    body = b'{"id": "evt_1", "type": "invoice.paid"}'
    sig = _mac(STRIPE_SECRET, f"{t}.".encode() + body).hex()
    assert gw.client.post(path, data=body, headers={
        "Stripe-Signature": f"t={t},v1={sig}"}).status_code == 202
    path = make(gw, sink, "github", "github", secrets=[GITHUB_SECRET])
    body = b'{"action": "opened"}'
    assert gw.client.post(path, data=body, headers={
        "X-Hub-Signature-256": "sha256=" + _mac(GITHUB_SECRET, body).hex(),
        "X-GitHub-Delivery": "d-1", "X-GitHub-Event": "issues"}).status_code == 202
    path = make(gw, sink, "shopify", "shopify", secrets=[SHOPIFY_SECRET])
    body = b'{"id": 1}'
    assert gw.client.post(path, data=body, headers={
        "X-Shopify-Hmac-Sha256": base64.b64encode(_mac(SHOPIFY_SECRET, body)).decode(),
        "X-Shopify-Webhook-Id": "w-1", "X-Shopify-Topic": "orders/create"}).status_code == 202
    path = make(gw, sink, "slack", "slack", secrets=[SLACK_SECRET])
    body = json.dumps({"event_id": "Ev1", "type": "event_callback",
                       "event": {"type": "app_mention"}}).encode()
    assert gw.client.post(path, data=body, headers={
        "X-Slack-Request-Timestamp": str(t),
        "X-Slack-Signature": "v0=" + _mac(SLACK_SECRET, f"v0:{t}:".encode() + body).hex(),
    }).status_code == 202
    path = make(gw, sink, "standard", "standard", secrets=[STANDARD_SECRET])
    body = '{"type": "user.created"}'
    sig = Webhook(STANDARD_SECRET).sign("msg_1", datetime.fromtimestamp(t, UTC), body)
    assert gw.client.post(path, data=body.encode(), headers={
        "webhook-id": "msg_1", "webhook-timestamp": str(t),
        "webhook-signature": sig}).status_code == 202
    path = make(gw, sink, "generic", "generic", signature=None,
                event_id={"header": "X-Id"}, event_type={"json": "/kind"})
    assert gw.client.post(path, data=b'{"kind": "week.closed"}',
                          headers={"X-Id": "g-1"}).status_code == 202


def types(gw, **query) -> dict[str, str]:
    status, body, _ = gw.get("/v1/deliveries", **query)
    assert status == 200, body
    return {d["source"]: d["event_type"] for d in body["deliveries"]}


def test_each_provider_records_its_type_and_the_list_filters_by_glob(gw, sink, clock):
    deliver_each(gw, sink, clock)
    assert types(gw) == {"stripe": "invoice.paid", "github": "issues.opened",
                         "shopify": "orders/create", "slack": "app_mention",
                         "standard": "user.created", "generic": "week.closed"}
    assert set(types(gw, event_type="*.created")) == {"standard"}
    assert set(types(gw, event_type="*create*")) == {"shopify", "standard"}
    assert set(types(gw, event_type="issues.?pened")) == {"github"}
    assert types(gw, event_type="INVOICE.*") == {}  # case-sensitive on both backends
    assert types(gw, event_type="invoice%") == {}  # LIKE's wildcards are themselves
    assert types(gw, event_type="invoice_paid") == {}
    assert set(types(gw, event_type="**")) == set(types(gw))
    status, body, _ = gw.get("/v1/sources/generic")
    assert body["source"]["event_type"] == {"json": "/kind"}


def test_a_refused_type_is_none_and_the_event_is_accepted(gw, sink):
    path = make(gw, sink, "gen", "generic", signature=None, event_id={"header": "X-Id"},
                event_type={"header": "X-Kind"})
    for n, kind in enumerate(["a" * 129, "a\u202eb", "bad\x7ftype"]):
        r = gw.client.post(path, data=b"{}", headers={"X-Id": f"e{n}", "X-Kind": kind})
        assert r.status_code == 202
    r = gw.client.post(path, data=b"{}", headers={"X-Id": "e9", "X-Kind": "a[1]"})
    assert r.status_code == 202
    assert sorted(d["event_type"] or "-" for d in gw.get("/v1/deliveries")[1]["deliveries"]) \
        == ["-", "-", "-", "a[1]"]
    assert set(types(gw, event_type="a[1]")) == {"gen"}  # "[" is itself, not a class
    assert types(gw, event_type="a[12]") == {}


def test_the_filter_and_the_rule_refuse_bad_input(gw, sink):
    for bad in ("", "a\x00", "x" * 257, "a\nb"):
        status, body, _ = gw.get("/v1/deliveries", event_type=bad)
        assert status == 400, (bad, body)
    status, body, _ = gw.post("/v1/sources", {"name": "s", "provider": "stripe",
                                              "secrets": [STRIPE_SECRET],
                                              "event_type": {"json": "/type"},
                                              "destination": {"url": sink.url}})
    assert status == 400
    for rule in ({"json": "type"}, {"header": "a b"}, {}, {"header": "a", "json": "/b"}):
        status, body, _ = gw.post("/v1/sources", {
            "name": "g", "provider": "generic", "signature": None,
            "event_id": {"header": "X-Id"}, "event_type": rule,
            "destination": {"url": sink.url}})
        assert status == 400, rule
