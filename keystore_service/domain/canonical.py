"""Strict JSON in, RFC 8785 canonical JSON and SHA-256 fingerprints out.

The request body is parsed strictly: a body docs/api.md calls malformed (NaN or Infinity,
duplicate member names, lone surrogates, nesting too deep for the parser) raises ValueError,
which the API turns into 400 `invalid_request`. Numbers are IEEE doubles in the canonical
form, so integers beyond 2^53 compare as doubles, exactly as a JavaScript sender sees them.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

import rfc8785


class _Duplicate(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Duplicate("duplicate member name in a JSON object")
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check_strings(value: Any) -> None:
    if isinstance(value, str):
        value.encode("utf-8")  # UnicodeEncodeError (a ValueError) on a lone surrogate
    elif isinstance(value, dict):
        for k, v in value.items():
            k.encode("utf-8")
            _check_strings(v)
    elif isinstance(value, list):
        for v in value:
            _check_strings(v)


def parse_json_object(raw: bytes) -> dict:
    """Parse a request body that must be one JSON object; ValueError if it is not."""
    value = parse_json_value(raw)
    if not isinstance(value, dict):
        raise ValueError("the body must be a JSON object")
    return value


def parse_json_value(raw: bytes) -> Any:
    """Parse any JSON text as strictly as a request body; ValueError if it is not I-JSON."""
    try:
        text = raw.decode("utf-8")
        value = json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
        if "\\u" in text:  # only an escape can smuggle in a lone surrogate
            _check_strings(value)
    except _Duplicate:
        raise
    except (ValueError, RecursionError) as exc:
        raise ValueError(_describe(exc)) from None
    return value


def _describe(exc: BaseException) -> str:
    if isinstance(exc, UnicodeError):
        return "the body is not valid UTF-8 or contains a lone surrogate"
    if isinstance(exc, RecursionError):
        return "the JSON is nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
    return str(exc) if "valid JSON" in str(exc) else "malformed JSON"


def _as_doubles(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return value
    if isinstance(value, int):
        return float(value)  # OverflowError (beyond a double) is refused by the caller
    if isinstance(value, dict):
        return {k: _as_doubles(v) for k, v in value.items()}
    return [_as_doubles(v) for v in value]


def canonical(value: Any) -> bytes:
    """RFC 8785 canonical UTF-8 bytes of a parsed JSON value; ValueError if not I-JSON."""
    try:
        return rfc8785.dumps(_as_doubles(value))
    except (rfc8785.CanonicalizationError, OverflowError, RecursionError) as exc:
        raise ValueError("the value cannot be canonicalised (RFC 8785): "
                         + ("number out of range" if isinstance(exc, OverflowError) else str(exc))
                         ) from None


def fingerprint(payload: Any) -> str:
    """`sha256:<hex>` of the payload's canonical form."""
    return "sha256:" + hashlib.sha256(canonical(payload)).hexdigest()
