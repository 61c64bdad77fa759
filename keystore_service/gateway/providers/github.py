"""GitHub: `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of the raw body keyed with
the webhook's secret; GitHub signs no timestamp (a replay is caught by the event id alone).
The event id is the `X-GitHub-Delivery` GUID, the same on a redelivery ("If you request a
redelivery, the X-GitHub-Delivery header will be the same as in the original delivery").

Checked against docs.github.com (validating webhook deliveries, delivery headers, best
practices, redelivering webhooks) and @octokit/webhooks-methods' verify(), which compares
the whole "sha256=<lower-case hex>" string as this module does; its one difference: it
throws on an empty body, which GitHub never sends.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from . import (
    Inbound,
    InvalidSignature,
    Provider,
    body_field,
    checked_event_type,
    equal,
    header_event_id,
    mac,
    require_secrets,
)

HEADER = "X-Hub-Signature-256"


def verify(inbound: Inbound, secrets: Sequence[str], config: Mapping[str, Any]) -> None:
    signature = inbound.headers.get(HEADER)
    if not signature:
        # The SHA-1 X-Hub-Signature is GitHub's legacy header: never enough on its own.
        raise InvalidSignature(f"no {HEADER} header (set a secret on the GitHub webhook)")
    for secret in require_secrets(secrets):
        if equal(signature, "sha256=" + mac(secret, inbound.body).hex()):
            return
    raise InvalidSignature(f"{HEADER} does not match")


def event_id(inbound: Inbound, config: Mapping[str, Any]) -> str:
    return header_event_id(inbound, "X-GitHub-Delivery")


def event_type(inbound: Inbound, config: Mapping[str, Any]) -> Optional[str]:
    """`X-GitHub-Event`, and `.` + the body's `action` where it has one: `issues.opened`,
    `push` (a push has no action)."""
    name = inbound.headers.get("X-GitHub-Event")
    if not name:
        return None
    action = body_field(inbound, "action")
    return checked_event_type(f"{name}.{action}" if isinstance(action, str) and action
                              else name)


PROVIDER = Provider(
    name="github",
    verify=verify,
    event_id=event_id,
    event_type=event_type,
    # GitHub never resends by itself; a person (or a script) may redeliver any delivery of
    # the past 3 days, under the same X-GitHub-Delivery.
    retry_window_seconds=3 * 24 * 3600,
    docs="https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries",
)
