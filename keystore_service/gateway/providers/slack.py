"""Slack (Events API): `X-Slack-Signature: v0=<hex>`, the HMAC-SHA256 of
"v0:<X-Slack-Request-Timestamp>:<raw body>" keyed with the app's signing secret. The event id
is the body's `event_id`. Before it sends events Slack checks the URL with a signed
{"type": "url_verification", "challenge": ...}, answered with {"challenge": ...}.

Checked against docs.slack.dev ("Verifying requests from Slack", the url_verification event)
and slack_sdk's SignatureVerifier, which accepts the same requests except a timestamp
written with other than ASCII digits (int() takes " 17", "+17", "١٧") and a signature with
non-ASCII characters (on which it raises TypeError instead of answering). Slash commands
and interactivity payloads are form-encoded and carry no event_id: not an Events API source.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from . import (
    Inbound,
    InvalidSignature,
    MissingEventId,
    Provider,
    body_event_id,
    body_field,
    checked_event_type,
    equal,
    mac,
    require_secrets,
    signed_seconds,
)

SIGNATURE = "X-Slack-Signature"
TIMESTAMP = "X-Slack-Request-Timestamp"
MAX_CHALLENGE_CHARS = 1024  # Slack's challenges are ~50 characters; the answer echoes it


def verify(inbound: Inbound, secrets: Sequence[str], config: Mapping[str, Any]) -> None:
    timestamp = inbound.headers.get(TIMESTAMP)
    signed_seconds(timestamp, inbound.now, f"the {TIMESTAMP} header")
    signature = inbound.headers.get(SIGNATURE)
    if not signature:
        raise InvalidSignature(f"no {SIGNATURE} header")
    # The timestamp exactly as sent (slack_sdk signs the header string too).
    message = f"v0:{timestamp}:".encode() + inbound.body
    for secret in require_secrets(secrets):
        if equal(signature, "v0=" + mac(secret, message).hex()):
            return
    raise InvalidSignature(f"{SIGNATURE} does not match")


def handshake(inbound: Inbound) -> Optional[dict]:
    try:
        body = inbound.json_object()
    except MissingEventId:
        return None
    challenge = body.get("challenge")
    if (body.get("type") == "url_verification" and isinstance(challenge, str)
            and 0 < len(challenge) <= MAX_CHALLENGE_CHARS):
        return {"challenge": challenge}
    return None


def event_id(inbound: Inbound, config: Mapping[str, Any]) -> str:
    return body_event_id(inbound, "event_id")


def event_type(inbound: Inbound, config: Mapping[str, Any]) -> Optional[str]:
    """The inner event's `type` (`app_mention`), else the body's (`event_callback`)."""
    inner = body_field(inbound, "event", "type")
    return checked_event_type(inner if isinstance(inner, str) and inner
                              else body_field(inbound, "type"))


PROVIDER = Provider(
    name="slack",
    verify=verify,
    event_id=event_id,
    event_type=event_type,
    handshake=handshake,
    # Three retries: nearly at once, after 1 minute and after 5 minutes (each with
    # X-Slack-Retry-Num); Slack's own page could not be reached from here, see the docs.
    retry_window_seconds=6 * 60,
    signs_timestamp=True,
    docs="https://docs.slack.dev/authentication/verifying-requests-from-slack/",
)
