"""Standard Webhooks (Svix and the senders that follow the spec): `webhook-id`,
`webhook-timestamp` and `webhook-signature` (or the same three spelt `svix-*`), the
signature a space-separated list of "v1,<base64 HMAC-SHA256>" of "<id>.<timestamp>.<body>"
keyed with the base64-decoded `whsec_...` secret; any v1 entry may match ("v1a" asymmetric
entries are not ours to check). The event id is `webhook-id`.

The HMAC itself is the `standardwebhooks` library's (Webhook.sign); the headers, the clock
and the comparison are checked here, since the library's verify() reads the wall clock and
floors a fractional timestamp (and, before 1.3, decoded base64 leniently).
`sign()` signs the gateway's forwards with a destination's secret the same way.
"""
from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from standardwebhooks.webhooks import Webhook, hmac_data

from . import (
    BadSecret,
    Inbound,
    InvalidSignature,
    MissingEventId,
    Provider,
    body_event_type,
    checked_event_id,
    equal,
    require_secrets,
    signed_seconds,
)

PREFIX = "whsec_"
# The spec: "Random. At least 24 bytes (192 bits, 512 maximum)" for symmetric secrets.
MIN_SECRET_BYTES, MAX_SECRET_BYTES = 24, 64
# secret_key's rule as a pattern: whsec_ and the canonical base64 (padding optional, also
# in part) of 24-64 bytes: 3k bytes are k groups of 4; 3k+1 end in a group "xQ" whose second
# character has its low 4 bits zero; 3k+2 end in "xxE" whose third has its low 2 bits zero.
_B64 = "[A-Za-z0-9+/]"
SECRET_PATTERN = (f"^whsec_(?:(?:{_B64}{{4}}){{8,21}}(?:{_B64}[AQgw](?:==?)?)?"
                  f"|(?:{_B64}{{4}}){{8,20}}{_B64}{{2}}[AEIMQUYcgkosw048]=?)$")
SPELLINGS = ("webhook-", "svix-")  # Svix's own libraries read both; webhook- wins


def secret_key(secret: str) -> bytes:
    """The HMAC key of a `whsec_` secret: its base64 part decoded, strictly (standard
    alphabet, padding optional but canonical), 24-64 bytes; else BadSecret."""
    if not isinstance(secret, str) or not secret.startswith(PREFIX):
        raise BadSecret("a Standard Webhooks secret starts with whsec_")
    text = secret[len(PREFIX):]
    padded = text + "=" * (-len(text) % 4)
    try:
        key = base64.b64decode(padded.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise BadSecret("the part after whsec_ is not base64") from None
    if base64.b64encode(key).decode() != padded:
        raise BadSecret("the part after whsec_ is not canonical base64")
    if not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
        raise BadSecret(f"the secret decodes to {len(key)} bytes, not "
                        f"{MIN_SECRET_BYTES}-{MAX_SECRET_BYTES}")
    return key


def check_secret(secret: str) -> None:
    secret_key(secret)


def _signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """"v1,<base64>" over "<id>.<timestamp>.<body>". The library signs text; a body that is
    not UTF-8 (possible only from a generic source) is signed over its bytes by the same
    library HMAC, which is what the spec's formula means for it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        digest = hmac_data(key, f"{msg_id}.{timestamp}.".encode() + body)
        return "v1," + base64.b64encode(digest).decode()
    return Webhook(key).sign(msg_id, datetime.fromtimestamp(timestamp, UTC), text)


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers of a forward of `body` under `msg_id` (the event
    id) at `timestamp` (Unix seconds), signed with `secret` (a `whsec_` secret, BadSecret
    otherwise)."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": _signature(secret_key(secret), msg_id, timestamp, body),
    }


def _spelling(inbound: Inbound) -> str | None:
    """The header prefix of this delivery: the first spelling with all three headers."""
    for prefix in SPELLINGS:
        if all(inbound.headers.get(prefix + name) for name in ("id", "timestamp", "signature")):
            return prefix
    return None


def verify(inbound: Inbound, secrets: Sequence[str], config: Mapping[str, Any]) -> None:
    prefix = _spelling(inbound)
    if prefix is None:
        raise InvalidSignature("no complete webhook-id, webhook-timestamp, webhook-signature "
                               "(or svix-*) headers")
    msg_id = inbound.headers.get(prefix + "id")
    try:
        msg_id.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no sender can have signed it
        raise InvalidSignature(f"the {prefix}id header is not text") from None
    timestamp = signed_seconds(inbound.headers.get(prefix + "timestamp"), inbound.now,
                               f"the {prefix}timestamp header")
    entries = [e for e in inbound.headers.get(prefix + "signature").split(" ")
               if e.startswith("v1,")]
    if not entries:
        raise InvalidSignature(f"{prefix}signature has no v1 signature")
    for secret in require_secrets(secrets):
        try:
            expected = _signature(secret_key(secret), msg_id, timestamp, inbound.body)
        except BadSecret:
            raise InvalidSignature("the source's secret is not a whsec_ secret") from None
        # every comparison runs, so the time taken does not say which one matched
        if sum(equal(expected, entry) for entry in entries):
            return
    raise InvalidSignature(f"no v1 signature of {prefix}signature matches")


def event_id(inbound: Inbound, config: Mapping[str, Any]) -> str:
    prefix = _spelling(inbound)
    if prefix is None:
        raise MissingEventId("no webhook-id (or svix-id) header")
    return checked_event_id(inbound.headers.get(prefix + "id"), f"the {prefix}id header")


PROVIDER = Provider(
    name="standard",
    verify=verify,
    event_id=event_id,
    event_type=body_event_type,  # the payload's `type` (the spec's required field)
    check_secret=check_secret,
    secret_pattern=SECRET_PATTERN,
    # The spec's example schedule ends 75 h 35 min 5 s after the first attempt (Svix's own
    # ends after 27 h 35 min 5 s); the longer one, since any sender may follow it.
    retry_window_seconds=75 * 3600 + 35 * 60 + 5,
    signs_timestamp=True,
    docs="https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/"
         "standard-webhooks.md",
)
