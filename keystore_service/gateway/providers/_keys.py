"""The event id of a `generic` source from JSON values: RFC 6901 pointers into the body, and
the Python client's `derive_key` rule (clients/python/keystore_client/_keys.py), written
again here because the service must not import the client. A test checks that both give the
same key for the same values.

The rule: a str is NFC-normalised and stripped (empty refused), an int is its decimal digits;
bool, float, null, objects and arrays are refused; each part has "%", "|" and control
characters escaped as %XX (UTF-8), the parts are joined with "|", and a key over 512 code
points becomes "%sha256:" + the hex SHA-256 of the joined form.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from . import MAX_EVENT_ID_CHARS, MissingEventId

_INDEX = re.compile(r"0|[1-9][0-9]{0,9}")  # an array index token, ASCII digits, no sign
_MISSING = object()


def valid_pointer(pointer: str) -> bool:
    """RFC 6901: "" (the whole document) or "/"-separated tokens where "~" is only "~0"
    or "~1"."""
    return pointer == "" or (pointer.startswith("/") and re.fullmatch(r"(?:[^~]|~[01])*",
                                                                         pointer) is not None)


def resolve(document: Any, pointer: str) -> Any:
    """The value at `pointer` (valid per RFC 6901), or MissingEventId."""
    value = document
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            value = value.get(token, _MISSING)
        elif isinstance(value, list) and _INDEX.fullmatch(token) and int(token) < len(value):
            value = value[int(token)]
        else:
            value = _MISSING
        if value is _MISSING:
            raise MissingEventId(f"the body has no value at the pointer {_quoted(pointer)}")
    return value


def derive_key(parts: Sequence[Any], pointers: Sequence[str]) -> str:
    """The key of `parts` (the values found at `pointers`, named in messages)."""
    joined = "|".join(_escape(_normalise(part, pointer))
                      for part, pointer in zip(parts, pointers, strict=True))
    if len(joined) > MAX_EVENT_ID_CHARS:
        return "%sha256:" + hashlib.sha256(joined.encode("utf-8")).hexdigest()
    return joined


def _normalise(part: Any, pointer: str) -> str:
    if isinstance(part, bool) or not isinstance(part, (str, int)):
        kind = "null" if part is None else type(part).__name__.replace("dict", "object") \
            .replace("list", "array").replace("float", "non-integer number")
        raise MissingEventId(f"the value at {_quoted(pointer)} is a {kind}, not a string "
                             "or an integer")
    text = (unicodedata.normalize("NFC", part).strip() if isinstance(part, str)
            else str(part))
    if not text:
        raise MissingEventId(f"the value at {_quoted(pointer)} is empty")
    return text


def _escape(text: str) -> str:
    return "".join(
        "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        if ch in "%|" or unicodedata.category(ch) in ("Cc", "Cs") else ch
        for ch in text)


def _quoted(pointer: str) -> str:
    # the operator's own pointer (checked at creation), never a value from the body
    return f'"{pointer}"'
