"""Provider rules, pure: how a provider signs a webhook, where its stable event id is, what
it resends. One module per provider, registered in PROVIDERS; nothing here does I/O, reads a
clock or knows HTTP beyond the headers and the raw body it is given.

Adding a provider is one module (a `Provider` instance named PROVIDER) and one test.
"""
from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

TOLERANCE_SECONDS = 300  # a signed timestamp more than 5 minutes from now, either way: refused


class InvalidSignature(Exception):
    """401 invalid_signature: missing, malformed or wrong signature, or a stale timestamp.
    The message says which, never the expected value."""


class MissingEventId(Exception):
    """400 invalid_request: the provider's rule names an event id the delivery lacks."""


class BadSecret(ValueError):
    """A signing secret that this provider cannot use (at source creation: 400)."""


class Headers:
    """Request headers, looked up case-insensitively (the last value of a repeated name)."""

    def __init__(self, pairs: Mapping[str, str] | list[tuple[str, str]]):
        items = pairs.items() if isinstance(pairs, Mapping) else pairs
        self._by_name = {k.lower(): v for k, v in items}

    def get(self, name: str) -> Optional[str]:
        return self._by_name.get(name.lower())

    def items(self) -> list[tuple[str, str]]:
        return list(self._by_name.items())


@dataclass(frozen=True)
class Inbound:
    """One delivery as it arrived: headers, the raw body bytes, and now (Unix seconds)."""

    headers: Headers
    body: bytes
    now: int

    def json(self) -> Any:
        """The body parsed as JSON; MissingEventId when it is not JSON (a JSON provider's
        event id is in its body)."""
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            raise MissingEventId("the body is not JSON") from None


@dataclass(frozen=True)
class Provider:
    """A provider's rules. `verify(inbound, secrets, config)` raises InvalidSignature unless
    one of the secrets (1-2, for rotation) signed it; `event_id(inbound, config)` returns the
    stable id or raises MissingEventId; `handshake(inbound)` is a body to answer 200 with and
    store nothing (Slack's url_verification), or None; `check_secret(secret)` raises
    BadSecret. `config` is the source's provider options (used by `generic`)."""

    name: str
    verify: Callable[[Inbound, list[str], Mapping[str, Any]], None]
    event_id: Callable[[Inbound, Mapping[str, Any]], str]
    check_secret: Callable[[str], None] = lambda secret: None
    handshake: Callable[[Inbound], Optional[dict]] = lambda inbound: None
    # How long the provider itself resends a delivery it did not get a 2xx for, in seconds
    # (its documented retry schedule): the default TTL of a source is built from it.
    retry_window_seconds: int = 3 * 24 * 3600
    signs_timestamp: bool = False
    needs_secret: bool = True
    # Body fields (JSON pointers) that change between resends of one event: left out of the
    # body's fingerprint, so a resend is a duplicate, not a changed body.
    volatile: tuple[str, ...] = field(default_factory=tuple)
    docs: str = ""  # the provider's documentation this module follows


def equal(a: str | bytes, b: str | bytes) -> bool:
    """Constant-time comparison of two signatures."""
    return hmac.compare_digest(a.encode() if isinstance(a, str) else a,
                               b.encode() if isinstance(b, str) else b)


def fresh(timestamp: int, now: int) -> bool:
    return abs(now - timestamp) <= TOLERANCE_SECONDS


PROVIDERS: dict[str, Provider] = {}
_loaded: list[bool] = []


def register(provider: Provider) -> Provider:
    PROVIDERS[provider.name] = provider
    return provider


def provider(name: str) -> Provider:
    """The registered provider `name` (the provider modules are imported on first use)."""
    _load()
    return PROVIDERS[name]


def names() -> list[str]:
    _load()
    return sorted(PROVIDERS)


def _load() -> None:
    if _loaded:
        return
    import importlib
    import pkgutil
    for module in pkgutil.iter_modules(__path__):
        register(importlib.import_module(f"{__name__}.{module.name}").PROVIDER)
    _loaded.append(True)
