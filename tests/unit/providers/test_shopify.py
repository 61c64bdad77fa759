"""Shopify: the base64 HMAC of the raw body as Shopify's docs compute it (no Shopify library
is a test dependency: its Python example is three lines, written out below), the event id
rule, and every malformed header refused cleanly."""
from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keystore_service.gateway.providers import InvalidSignature, MissingEventId
from keystore_service.gateway.providers.shopify import PROVIDER

from .support import MALFORMED, inbound, plain_secrets, texts

SECRET = "shpss_0123456789abcdef0123456789abcdef"
SECOND = "shpss_rotated_fedcba9876543210"
BODY = b'{"id":820982911946154508,"email":"jon@example.com","total_price":"403.00"}'
WEBHOOK_ID = "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"


def shopify_docs_hmac(body: bytes, secret: str) -> str:
    """Shopify's documented check: base64 of HMAC-SHA256(client secret, raw body)."""
    return base64.b64encode(hmac.new(secret.encode("utf-8"), body, hashlib.sha256).digest()
                            ).decode()


def ours(body: bytes, signature, secrets=(SECRET,)) -> bool:
    headers = {"X-Shopify-Hmac-Sha256": signature} if signature is not None else {}
    try:
        PROVIDER.verify(inbound(headers, body), list(secrets), {})
        return True
    except InvalidSignature:
        return False


def test_valid_tampered_wrong_secret_and_rotation():
    signature = shopify_docs_hmac(BODY, SECRET)
    assert ours(BODY, signature)
    assert not ours(BODY.replace(b"403.00", b"0.01"), signature)
    assert not ours(BODY, shopify_docs_hmac(BODY, "shpss_someone_else"))
    # Shopify takes up to an hour to sign with a rotated client secret: both are tried.
    assert ours(BODY, shopify_docs_hmac(BODY, SECOND), secrets=(SECRET, SECOND))
    assert ours(BODY, signature, secrets=(SECOND, SECRET))


def test_the_header_name_is_matched_in_any_case():
    # Shopify's docs spell it X-Shopify-Hmac-SHA256; HTTP/2 lower-cases it.
    for name in ("X-Shopify-Hmac-SHA256", "x-shopify-hmac-sha256"):
        PROVIDER.verify(inbound({name: shopify_docs_hmac(BODY, SECRET)}, BODY), [SECRET], {})


@settings(max_examples=200, derandomize=True)
@given(text=texts, secret=plain_secrets, signer_is_secret=st.booleans(), tamper=st.booleans())
def test_we_accept_exactly_what_the_documented_check_accepts(text, secret, signer_is_secret,
                                                             tamper):
    body = text.encode()
    signature = shopify_docs_hmac(body, secret if signer_is_secret else secret + "0")
    delivered = body + b" " if tamper else body
    expected = hmac.compare_digest(shopify_docs_hmac(delivered, secret), signature)
    assert ours(delivered, signature, (secret,)) == expected


@pytest.mark.parametrize("value", MALFORMED + [
    None,
    shopify_docs_hmac(BODY, SECRET).rstrip("="),         # padding stripped
    base64.urlsafe_b64encode(b"\xfb" * 32).decode(),      # another alphabet
    hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest(),  # hex, not base64
    shopify_docs_hmac(BODY, SECRET) + ", " + shopify_docs_hmac(BODY, SECRET),
    " " + shopify_docs_hmac(BODY, SECRET),
])
def test_a_malformed_signature_header_is_invalid_signature(value):
    assert not ours(BODY, value)


def test_the_event_id_is_the_webhook_id_and_never_the_event_id():
    headers = {"X-Shopify-Webhook-Id": WEBHOOK_ID,
               "X-Shopify-Event-Id": "98880550-7158-44d4-b7cd-2c97c8a091b5"}
    assert PROVIDER.event_id(inbound(headers), {}) == WEBHOOK_ID


def test_two_topics_of_one_merchant_action_are_two_events():
    # Shopify's X-Shopify-Event-Id is shared "across all deliveries produced by the same
    # merchant action" (orders/create and orders/paid of one checkout): keyed on it, the
    # second delivery would be held as a changed body and never reach the workflow.
    action = "98880550-7158-44d4-b7cd-2c97c8a091b5"
    create = inbound({"X-Shopify-Event-Id": action, "X-Shopify-Topic": "orders/create",
                      "X-Shopify-Webhook-Id": "11111111-0000-4000-8000-000000000001"})
    paid = inbound({"X-Shopify-Event-Id": action, "X-Shopify-Topic": "orders/paid",
                    "X-Shopify-Webhook-Id": "11111111-0000-4000-8000-000000000002"})
    assert PROVIDER.event_id(create, {}) != PROVIDER.event_id(paid, {})


@pytest.mark.parametrize("headers", [
    {}, {"X-Shopify-Event-Id": "98880550-7158-44d4-b7cd-2c97c8a091b5"},
    {"X-Shopify-Webhook-Id": ""}, {"X-Shopify-Webhook-Id": "x" * 513},
    {"X-Shopify-Webhook-Id": "a\nb"}, {"X-Shopify-Webhook-Id": "\x9f"},
    {"X-Shopify-Webhook-Id": "\udfff"},
])
def test_no_usable_webhook_id_is_missing_event_id(headers):
    with pytest.raises(MissingEventId):
        PROVIDER.event_id(inbound(headers), {})


def test_shopify_resends_for_four_hours_and_the_ttl_covers_the_forwarding_window():
    assert PROVIDER.retry_window_seconds == 4 * 3600
    assert PROVIDER.default_ttl_seconds() == 72 * 3600 + 24 * 3600
