"""Provider rules, pure: how a provider signs a webhook, where its stable event id is, what
it resends. One module per provider, registered in PROVIDERS; nothing here does I/O, reads a
clock or knows HTTP beyond the headers and the raw body it is given.

Adding a provider is one module (a `Provider` instance named PROVIDER) and one test
(tests/unit/providers/test_<name>.py; a test checks that every registered provider has one).
Modules whose name starts with "_" are helpers, not providers.

Every function here reads untrusted input (headers and body of a public request): it either
returns or raises InvalidSignature / MissingEventId, never another exception, and its messages
never quote a header, the body or an expected value.
"""
from __future__ import annotations

import hmac
import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

TOLERANCE_SECONDS = 300  # a signed timestamp more than 5 minutes from now, either way: refused
MAX_EVENT_ID_CHARS = 512  # docs/api.md's limit on a key, in code points
# An event's type is shown on the page and in logs and matched by filters: 128 code points
# hold every provider's types (Stripe's longest is under 60); a longer one is not cut (a cut
# type could match a filter the real one does not) but recorded as none.
MAX_EVENT_TYPE_CHARS = 128
# Defaults (docs/webhooks/README.md): a source's forward retry window, and the day its TTL adds on
# top of the longer of that and the provider's own retry window.
FORWARDING_WINDOW_SECONDS = 72 * 3600
TTL_MARGIN_SECONDS = 24 * 3600
MAX_SECRET_CHARS = 1024  # far above any provider's secret; a pasted file is a mistake
# ASCII digits only ("\d" would take "²" and "٢"); 15 digits keep int() away from huge
# strings and still reach far past any real clock (10^15 s is 31 million years).
_UNIX_SECONDS = re.compile(r"[0-9]{1,15}")


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
        event id is in its body). Parsed once per delivery (the id and the type read it)."""
        parsed = self.__dict__.get("_parsed")
        if parsed is None:
            try:
                parsed = (True, json.loads(self.body))
            # ValueError covers UnicodeDecodeError and an integer over Python's 4,300 digits;
            # RecursionError is "[[[[...]]]]" nested deeper than the interpreter's stack.
            except (ValueError, RecursionError):
                parsed = (False, None)
            object.__setattr__(self, "_parsed", parsed)
        if not parsed[0]:
            raise MissingEventId("the body is not JSON")
        return parsed[1]

    def json_object(self) -> dict:
        """The body as a JSON object; MissingEventId when it is anything else."""
        body = self.json()
        if not isinstance(body, dict):
            raise MissingEventId("the body is not a JSON object")
        return body


def plain_secret(secret: str) -> None:
    """The rule for a secret used as given (GitHub, Shopify, Slack, generic): 1-1024
    characters, no control characters, no surrounding whitespace (a secret pasted with its
    newline would fail every delivery with 401; refusing it at creation says why)."""
    if not isinstance(secret, str) or not secret:
        raise BadSecret("the secret is empty")
    if len(secret) > MAX_SECRET_CHARS:
        raise BadSecret(f"the secret is over {MAX_SECRET_CHARS} characters")
    if secret != secret.strip():
        raise BadSecret("the secret has surrounding whitespace")
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in secret):
        raise BadSecret("the secret contains control characters")


# plain_secret's rule as a regular expression (published in /openapi.json for each provider
# that uses it; tests/unit/test_source_schemas.py checks that they agree): no control
# characters (CONTROL: the Cc ones, a regex class body), and neither end whitespace. The
# length is the API's (1-512).
CONTROL = "\\u0000-\\u001f\\u007f-\\u009f"
PLAIN_SECRET_PATTERN = f"^[^\\s{CONTROL}](?:[^{CONTROL}]*[^\\s{CONTROL}])?$"


def no_options(config: Mapping[str, Any]) -> None:
    """The config rule of every provider but `generic`: no options."""
    if config:
        raise ValueError("this provider takes no signature or event_id options")


@dataclass(frozen=True)
class Provider:
    """A provider's rules.
    - `verify(inbound, secrets, config)`: raises InvalidSignature unless one of `secrets`
      (1-2, for rotation; tried in turn) signed it, with a fresh timestamp where signed.
    - `event_id(inbound, config) -> str`: the stable id (1-512 code points, no Cc/Cs) or
      MissingEventId. Call it only after `verify` passed.
    - `handshake(inbound) -> dict | None`: a body to answer 200 with, storing nothing
      (Slack's url_verification), after `verify` passed; None for an ordinary delivery.
    - `event_type(inbound, config) -> str | None`: the event's type (checked_event_type's
      rule) or None; never raises, and never refuses a delivery.
    - `check_secret(secret)`: raises BadSecret for a secret this provider cannot use.
    - `secret_pattern`: the same rule as a regular expression (Python and ECMA alike), for
      /openapi.json: a secret matches it exactly when check_secret takes it.
    - `needs_secret(config) -> bool`: whether a source with this config must have secrets
      (False only for `generic` without a signature: it then takes none).
    - `validate_config(config)`: raises ValueError (its message is for the operator) for
      options the provider cannot use; {} is the only config of all but `generic`.
    `config` is the source's provider options: for `generic`, {"signature", "event_id"}."""

    name: str
    verify: Callable[[Inbound, Sequence[str], Mapping[str, Any]], None]
    event_id: Callable[[Inbound, Mapping[str, Any]], str]
    event_type: Callable[[Inbound, Mapping[str, Any]], Optional[str]] = \
        lambda inbound, config: None
    check_secret: Callable[[str], None] = plain_secret
    secret_pattern: str = PLAIN_SECRET_PATTERN
    handshake: Callable[[Inbound], Optional[dict]] = lambda inbound: None
    needs_secret: Callable[[Mapping[str, Any]], bool] = lambda config: True
    validate_config: Callable[[Mapping[str, Any]], None] = no_options
    # How long the provider itself resends a delivery it did not get a 2xx for, in seconds
    # (its documented retry schedule): the default TTL of a source is built from it.
    retry_window_seconds: int = 3 * 24 * 3600
    signs_timestamp: bool = False
    # Body fields (JSON pointers) that change between resends of one event: left out of the
    # body's fingerprint, so a resend is a duplicate, not a changed body.
    volatile: tuple[str, ...] = field(default_factory=tuple)
    docs: str = ""  # the provider's documentation this module follows

    def default_ttl_seconds(self, forwarding_window_seconds: int = FORWARDING_WINDOW_SECONDS
                            ) -> int:
        """A source's default TTL: an event id is remembered while the provider may still
        resend it and while the gateway may still forward it, and a day more."""
        return max(self.retry_window_seconds, forwarding_window_seconds) + TTL_MARGIN_SECONDS


def _bytes(value: str | bytes) -> bytes:
    # surrogatepass: a lone surrogate compares (unequal) instead of raising
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value


def equal(a: str | bytes, b: str | bytes) -> bool:
    """Constant-time comparison of two signatures (any str, any length: never raises)."""
    return hmac.compare_digest(_bytes(a), _bytes(b))


def mac(secret: str | bytes, message: bytes, algorithm: str = "sha256") -> bytes:
    """HMAC of `message` keyed with `secret` (a str is keyed by its UTF-8 bytes)."""
    return hmac.new(_bytes(secret), message, algorithm).digest()


def fresh(timestamp: int, now: int) -> bool:
    return abs(now - timestamp) <= TOLERANCE_SECONDS


def signed_seconds(value: Optional[str], now: int, what: str) -> int:
    """A signed Unix timestamp (ASCII digits) within the tolerance of `now`, else
    InvalidSignature naming `what` (the header or field, never its value)."""
    if value is None or not _UNIX_SECONDS.fullmatch(value):
        raise InvalidSignature(f"{what} is missing or not a Unix time in ASCII digits")
    seconds = int(value)
    if not fresh(seconds, now):
        raise InvalidSignature(f"{what} is more than {TOLERANCE_SECONDS} s from now")
    return seconds


def require_secrets(secrets: Sequence[str]) -> Sequence[str]:
    """The source's secrets, or InvalidSignature when there are none (fail closed)."""
    if not secrets:
        raise InvalidSignature("the source has no signing secret")
    return secrets


def checked_event_id(value: Any, what: str) -> str:
    """`value` as an event id under docs/api.md's key rule (1-512 code points, no control
    or surrogate characters; kept exactly as sent), else MissingEventId naming `what`."""
    if not isinstance(value, str) or not value:
        raise MissingEventId(f"{what} is missing or not a non-empty string")
    if len(value) > MAX_EVENT_ID_CHARS:
        raise MissingEventId(f"{what} is over {MAX_EVENT_ID_CHARS} characters")
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in value):
        raise MissingEventId(f"{what} contains control characters")
    return value


def checked_event_type(value: Any) -> Optional[str]:
    """`value` as an event type: a string of 1-128 code points with no control (Cc),
    surrogate (Cs) or format (Cf: bidirectional overrides, zero-width) characters, kept
    exactly; anything else is None (recorded as no type: the event is accepted all the
    same). Nothing is stripped: a type that differs from what the provider sent would be
    shown and matched as one it did not send."""
    if not isinstance(value, str) or not value or len(value) > MAX_EVENT_TYPE_CHARS:
        return None
    if any(unicodedata.category(ch) in ("Cc", "Cs", "Cf") for ch in value):
        return None
    return value


def body_field(inbound: Inbound, *path: str) -> Any:
    """The body's value at `path` (object members), or None when the body is not a JSON
    object or has none there (never raises)."""
    try:
        value: Any = inbound.json()
    except MissingEventId:
        return None
    for name in path:
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


def body_event_type(inbound: Inbound, config: Mapping[str, Any]) -> Optional[str]:
    """The body's `type` (Stripe, Standard Webhooks)."""
    return checked_event_type(body_field(inbound, "type"))


def header_event_id(inbound: Inbound, name: str) -> str:
    return checked_event_id(inbound.headers.get(name), f"the {name} header")


def body_event_id(inbound: Inbound, name: str) -> str:
    return checked_event_id(inbound.json_object().get(name), f"the body's {name!r}")


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
        if module.name.startswith("_"):
            continue
        register(importlib.import_module(f"{__name__}.{module.name}").PROVIDER)
    _loaded.append(True)
