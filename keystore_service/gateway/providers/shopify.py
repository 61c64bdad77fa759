"""Shopify: `X-Shopify-Hmac-Sha256`, the base64 HMAC-SHA256 of the raw body keyed with the
app's client secret; no timestamp is signed.

The event id is `X-Shopify-Webhook-Id`, never `X-Shopify-Event-Id`. Shopify's current
"Webhooks delivery structure" and "Verify webhook deliveries" pages define Webhook-Id as "a
unique composite key per delivery. Use to identify and deduplicate individual deliveries"
and Event-Id as "shared across all deliveries produced by the same merchant action": one
action can start deliveries of several topics (orders/create and orders/paid) to the same
URL, and keyed on Event-Id the second would be taken for a changed resend of the first and
held, so the workflow would never see it. (The older "Ignore duplicate webhooks" page still
names Event-Id; it predates the Webhook-Id definition.) A repeat of a delivery carries its
Webhook-Id again, so deduplication on it loses nothing.
"""
from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from . import (
    Inbound,
    InvalidSignature,
    Provider,
    checked_event_type,
    equal,
    header_event_id,
    mac,
    require_secrets,
)

HEADER = "X-Shopify-Hmac-Sha256"


def verify(inbound: Inbound, secrets: Sequence[str], config: Mapping[str, Any]) -> None:
    signature = inbound.headers.get(HEADER)
    if not signature:
        raise InvalidSignature(f"no {HEADER} header")
    for secret in require_secrets(secrets):
        if equal(signature, base64.b64encode(mac(secret, inbound.body)).decode()):
            return
    raise InvalidSignature(f"{HEADER} does not match")


def event_id(inbound: Inbound, config: Mapping[str, Any]) -> str:
    return header_event_id(inbound, "X-Shopify-Webhook-Id")


def event_type(inbound: Inbound, config: Mapping[str, Any]) -> Optional[str]:
    """`X-Shopify-Topic`: `orders/create`."""
    return checked_event_type(inbound.headers.get("X-Shopify-Topic"))


PROVIDER = Provider(
    name="shopify",
    verify=verify,
    event_id=event_id,
    event_type=event_type,
    # "Webhooks will now be retried a total of 8 times over 4 hours using an exponential
    # backoff schedule", with the original payload (Shopify changelog, 2024-09-10).
    retry_window_seconds=4 * 3600,
    docs="https://shopify.dev/docs/apps/build/webhooks/verify-deliveries",
)
