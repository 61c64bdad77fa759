"""Helpers of the provider tests: deliveries, the malformed header values every provider must
refuse cleanly, and the providers' own libraries held to a given clock."""
from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime
from types import SimpleNamespace
from unittest import mock

from hypothesis import strategies as st

from keystore_service.gateway.providers import Headers, Inbound

NOW = 1_800_000_000  # 2027-01-15T08:00:00Z, the tests' fixed "now" (tests/support.T0)

# What an attacker can put in any header: empty, blank, non-ASCII digits ("²".isdigit() and
# int("٢") are both true), beyond int64, negative, fractional, exponent, signed, padded, CR/LF,
# NUL, C1 controls (a UTF-8 byte read as latin-1), a lone surrogate, huge, and separators.
MALFORMED = [
    "", " ", "²", "٢", "١٧٠٠٠٠٠٠٠٠", str(2**63), str(-(2**63)), "-1", "1.5", "1e9",
    "+1800000000", " 1800000000", "1_800_000_000", "0x6b49d200", "abc", "\r\n", "a\r\nb",
    "\x00", "\x85", "\ud800", "é", "x" * 100_000, "=", ",", ",,,", "t=", "v1=", "v1,",
    "sha256=", "v0=", "!!!!", "====", "null", "[]", "{}",
]


def inbound(headers, body: bytes = b"{}", now: int = NOW) -> Inbound:
    return Inbound(Headers(headers), body, now)


# Body text a provider signs: any Unicode but lone surrogates (bodies are UTF-8 bytes).
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=120)
# Secrets as the providers hand them out: printable ASCII without surrounding spaces.
plain_secrets = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), min_size=1,
                        max_size=48)


@contextmanager
def stripe_clock(now: int):
    """stripe.WebhookSignature reads time.time(): give it `now`."""
    import stripe._webhook
    with mock.patch.object(stripe._webhook, "time", SimpleNamespace(time=lambda: now)):
        yield


@contextmanager
def standardwebhooks_clock(now: int):
    """standardwebhooks' Webhook.verify reads datetime.now(): give it `now`."""
    import standardwebhooks.webhooks as library

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.fromtimestamp(now, tz)

    with mock.patch.object(library, "datetime", Frozen):
        yield


class SlackClock:
    def __init__(self, now: int):
        self._now = now

    def now(self) -> float:
        return self._now
