"""Any other sender: an HMAC of the raw body in a header of the operator's choosing, or no
signature at all (the unguessable ingest URL is then the only credential), and the event id
from a header or from JSON pointers into the body (the seed's "project + week" case).

The config (validated by `validate_config` when the source is created):
    {"signature": {"header": "X-Signature", "algorithm": "sha256" | "sha1",
                   "encoding": "hex" | "base64", "prefix": "sha256="} | None,
     "event_id": {"header": "X-Event-Id"} | {"json": ["/project", "/week"]},
     "event_type": {"header": "X-Event-Type"} | {"json": "/type"} | None}   (optional)
The header must hold exactly `prefix` + the encoded HMAC (hex in either case; base64 in the
standard alphabet, padded or not). No timestamp is signed: a replay is caught by the event id
alone, for as long as the source's TTL.
"""
from __future__ import annotations

import base64
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from . import (
    Inbound,
    InvalidSignature,
    MissingEventId,
    Provider,
    checked_event_type,
    equal,
    header_event_id,
    mac,
    require_secrets,
)
from ._keys import derive_key, resolve, valid_pointer

ALGORITHMS = ("sha256", "sha1")
ENCODINGS = ("hex", "base64")
MAX_POINTERS = 8  # a key of more parts than this is a record, not an identifier
MAX_POINTER_CHARS = 256
MAX_PREFIX_CHARS = 64
MAX_HEADER_CHARS = 128
# RFC 9110 token characters: what a header name may be made of.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def validate_config(config: Mapping[str, Any]) -> None:
    """Raises ValueError, with a message for the operator, unless `config` is a usable
    generic config (see the module's docstring)."""
    if not isinstance(config, Mapping):
        raise ValueError("the generic options must be an object")
    unknown = set(config) - {"signature", "event_id", "event_type"}
    if unknown:
        raise ValueError(f"unknown generic options: {', '.join(sorted(map(str, unknown)))}")
    if "signature" not in config:
        raise ValueError("signature is required: {header, algorithm, encoding, prefix}, or "
                         "null for a source without signature")
    if config["signature"] is not None:
        _check_signature(config["signature"])
    if "event_id" not in config:
        raise ValueError('event_id is required: {"header": NAME} or {"json": [POINTERS]}')
    _check_event_id(config["event_id"])
    if config.get("event_type") is not None:
        _check_event_type(config["event_type"])


def _check_header(name: Any, what: str) -> None:
    if not (isinstance(name, str) and 0 < len(name) <= MAX_HEADER_CHARS
            and _TOKEN.fullmatch(name)):
        raise ValueError(f"{what} must be a header name (1-{MAX_HEADER_CHARS} letters, "
                         "digits and !#$%&'*+-.^_`|~)")


def _check_signature(signature: Any) -> None:
    if not isinstance(signature, Mapping):
        raise ValueError("signature must be an object or null")
    unknown = set(signature) - {"header", "algorithm", "encoding", "prefix"}
    if unknown:
        raise ValueError(f"unknown signature options: {', '.join(sorted(map(str, unknown)))}")
    _check_header(signature.get("header"), "signature.header")
    if signature.get("algorithm") not in ALGORITHMS:
        raise ValueError("signature.algorithm must be sha256 or sha1")
    if signature.get("encoding") not in ENCODINGS:
        raise ValueError("signature.encoding must be hex or base64")
    prefix = signature.get("prefix", "")
    # Visible ASCII and inner spaces only: servers trim a header value's ends, so a prefix
    # that starts or ends with a space could never match.
    if not (isinstance(prefix, str) and len(prefix) <= MAX_PREFIX_CHARS
            and re.fullmatch(r"[\x20-\x7e]*", prefix) and prefix == prefix.strip()):
        raise ValueError(f"signature.prefix must be 0-{MAX_PREFIX_CHARS} visible ASCII "
                         "characters (e.g. sha256=)")


def _check_event_id(rule: Any) -> None:
    if not isinstance(rule, Mapping) or len(rule) != 1 or not {"header", "json"} & set(rule):
        raise ValueError('event_id must be {"header": NAME} or {"json": [POINTERS]}')
    if "header" in rule:
        _check_header(rule["header"], "event_id.header")
        return
    pointers = rule["json"]
    if not (isinstance(pointers, list) and 1 <= len(pointers) <= MAX_POINTERS):
        raise ValueError(f"event_id.json must be a list of 1-{MAX_POINTERS} JSON pointers")
    for pointer in pointers:
        if not (isinstance(pointer, str) and len(pointer) <= MAX_POINTER_CHARS
                and valid_pointer(pointer)
                and not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in pointer)):
            raise ValueError(f"event_id.json holds an invalid JSON pointer (RFC 6901, e.g. "
                             f"/data/id; at most {MAX_POINTER_CHARS} characters)")
    if len(set(pointers)) != len(pointers):
        raise ValueError("event_id.json names the same pointer twice")


def _check_event_type(rule: Any) -> None:
    if not isinstance(rule, Mapping) or len(rule) != 1 or not {"header", "json"} & set(rule):
        raise ValueError('event_type must be {"header": NAME}, {"json": POINTER} or null')
    if "header" in rule:
        _check_header(rule["header"], "event_type.header")
        return
    pointer = rule["json"]
    if not (isinstance(pointer, str) and 0 < len(pointer) <= MAX_POINTER_CHARS
            and valid_pointer(pointer)
            and not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in pointer)):
        raise ValueError(f"event_type.json must be a JSON pointer (RFC 6901, e.g. /type; "
                         f"at most {MAX_POINTER_CHARS} characters)")


def _valid(config: Mapping[str, Any], error: type[Exception]) -> Mapping[str, Any]:
    """`config` if valid; else `error` (fail closed: a config that slipped past creation
    checks refuses deliveries instead of raising ValueError on the public path)."""
    try:
        validate_config(config)
    except ValueError:
        raise error("the source's generic options are invalid") from None
    return config


def needs_secret(config: Mapping[str, Any]) -> bool:
    """A source without signature takes no secret; any other config (even an invalid one)
    needs one."""
    return not (isinstance(config, Mapping) and "signature" in config
                and config["signature"] is None)


def verify(inbound: Inbound, secrets: Sequence[str], config: Mapping[str, Any]) -> None:
    signature: Optional[Mapping[str, Any]] = _valid(config, InvalidSignature)["signature"]
    if signature is None:
        return
    header, prefix = signature["header"], signature.get("prefix", "")
    value = inbound.headers.get(header)
    if not value or not value.startswith(prefix):
        raise InvalidSignature(f"no {header} header starting with the configured prefix")
    candidate = value[len(prefix):]
    for secret in require_secrets(secrets):
        digest = mac(secret, inbound.body, signature["algorithm"])
        if signature["encoding"] == "hex":
            matched = equal(candidate.lower(), digest.hex())
        else:
            encoded = base64.b64encode(digest).decode()
            matched = equal(candidate, encoded) | equal(candidate, encoded.rstrip("="))
        if matched:
            return
    raise InvalidSignature(f"{header} does not match")


def event_id(inbound: Inbound, config: Mapping[str, Any]) -> str:
    rule = _valid(config, MissingEventId)["event_id"]
    if "header" in rule:
        return header_event_id(inbound, rule["header"])
    body = inbound.json()
    pointers = rule["json"]
    return derive_key([resolve(body, pointer) for pointer in pointers], pointers)


def event_type(inbound: Inbound, config: Mapping[str, Any]) -> Optional[str]:
    """The configured header's value, or the string at the configured JSON pointer; None
    without a rule, or when the delivery has no such string (never raises)."""
    try:
        rule = _valid(config, MissingEventId).get("event_type")
    except MissingEventId:
        return None
    if not rule:
        return None
    if "header" in rule:
        return checked_event_type(inbound.headers.get(rule["header"]))
    try:
        return checked_event_type(resolve(inbound.json(), rule["json"]))
    except MissingEventId:
        return None


PROVIDER = Provider(
    name="generic",
    verify=verify,
    event_id=event_id,
    event_type=event_type,
    needs_secret=needs_secret,
    validate_config=validate_config,
    # Unknown: the sender's own schedule. 72 h, the forwarding retry window's default; an
    # operator whose sender retries longer sets the source's ttl_seconds.
    retry_window_seconds=3 * 24 * 3600,
    docs="",
)
