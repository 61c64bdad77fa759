"""Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, the hex HMAC-SHA256 of
"<t>.<raw body>" keyed with the whole `whsec_...` string; any v1 entry may match (Stripe
sends two while an endpoint's secret is being rolled). The event id is the body's `id`.

Checked against docs.stripe.com/webhooks (verify manually, automatic retries) and the
`stripe` library's WebhookSignature.verify_header, which accepts the same headers except:
- a timestamp more than 300 s in the future (the library: the past only; docs/webhooks/providers.md
  refuses both ways);
- a `t=` written with other than ASCII digits (int() takes " 17", "+17", "1_7", "١٧");
- a header with two t= elements (the library takes the first) or a v1 value followed by
  "=..." (the library cuts it there).
Stripe never sends these; each is refused here as malformed.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import (
    CONTROL,
    BadSecret,
    Inbound,
    InvalidSignature,
    Provider,
    body_event_id,
    body_event_type,
    equal,
    mac,
    plain_secret,
    require_secrets,
    signed_seconds,
)

HEADER = "Stripe-Signature"
# check_secret as a pattern: a plain secret (see PLAIN_SECRET_PATTERN) that starts with
# whsec_ and has more after it.
SECRET_PATTERN = f"^whsec_[^{CONTROL}]*[^\\s{CONTROL}]$"


def check_secret(secret: str) -> None:
    plain_secret(secret)
    if not secret.startswith("whsec_") or secret == "whsec_":
        raise BadSecret("a Stripe signing secret starts with whsec_ (the endpoint's "
                        "'Signing secret' in the Dashboard)")


def _parse(header: str | None) -> tuple[str, list[str]]:
    """(t, [v1 signatures]) of the header; its other elements (v0, future schemes) are
    ignored, as Stripe's docs say."""
    if not header:
        raise InvalidSignature(f"no {HEADER} header")
    timestamps, signatures = [], []
    for element in header.split(","):
        key, sep, value = element.partition("=")
        if key == "t" and sep:
            timestamps.append(value)
        elif key == "v1" and sep:
            signatures.append(value)
    if len(timestamps) != 1:
        raise InvalidSignature(f"{HEADER} needs exactly one t= element")
    if not signatures:
        raise InvalidSignature(f"{HEADER} has no v1 signature")
    return timestamps[0], signatures


def verify(inbound: Inbound, secrets: Sequence[str], config: Mapping[str, Any]) -> None:
    t, signatures = _parse(inbound.headers.get(HEADER))
    seconds = signed_seconds(t, inbound.now, f"the t= of {HEADER}")
    # The decimal form of t, as Stripe's libraries sign it ("%d"): "017" signs as "17".
    message = f"{seconds}.".encode() + inbound.body
    for secret in require_secrets(secrets):
        expected = mac(secret, message).hex()
        # every comparison runs, so the time taken does not say which one matched
        if sum(equal(expected, candidate) for candidate in signatures):
            return
    raise InvalidSignature(f"no v1 signature of {HEADER} matches")


def event_id(inbound: Inbound, config: Mapping[str, Any]) -> str:
    return body_event_id(inbound, "id")


PROVIDER = Provider(
    name="stripe",
    verify=verify,
    event_id=event_id,
    event_type=body_event_type,  # the Event's `type`: invoice.paid
    check_secret=check_secret,
    secret_pattern=SECRET_PATTERN,
    # Live mode: automatic retries with exponential backoff "for up to three days" (a
    # sandbox retries three times over a few hours).
    retry_window_seconds=3 * 24 * 3600,
    signs_timestamp=True,
    # The Event's count of endpoints still waiting for it: it falls as other endpoints
    # acknowledge, so two deliveries of one event may differ there and nowhere else.
    volatile=("/pending_webhooks",),
    docs="https://docs.stripe.com/webhooks",
)
