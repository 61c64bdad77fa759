"""JSON Pointers (RFC 6901), pure: what a check's `found`, `absent` and `resource_id`
pointers and a send's `resource_id_pointer` name in a destination's answer.

A pointer is "" (the whole document) or a sequence of "/"-prefixed reference tokens, where
`~1` stands for "/" and `~0` for "~" (unescaped in that order, so `~01` is the name `~1`);
any other `~` is a malformed pointer. An array's token is "0" or a decimal number without a
leading zero, in ASCII digits only ("-", the element after the last, never exists)."""
from __future__ import annotations

import json
import re
from typing import Any, Optional

_TOKEN = re.compile(r"(?:[^~]|~[01])*")
_INDEX = re.compile(r"0|[1-9][0-9]*")  # re's [0-9] is ASCII only: "١" is no index
MAX_INDEX_DIGITS = 18  # beyond any list a 64 KiB answer can hold (and below int()'s limit)
MAX_ID_CHARS = 1024  # a resource id longer than this is no id a person or a report can use


def valid(pointer: str) -> bool:
    """Whether `pointer` is a well-formed JSON Pointer."""
    return tokens(pointer) is not None


def tokens(pointer: str) -> Optional[list[str]]:
    """The unescaped reference tokens of `pointer`, or None when it is malformed."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        return None
    parts = pointer[1:].split("/")
    if not all(_TOKEN.fullmatch(p) for p in parts):
        return None
    return [p.replace("~1", "/").replace("~0", "~") for p in parts]


def resolve(doc: Any, pointer: str) -> tuple[bool, Any]:
    """(True, the value) when `pointer` names a value in `doc` (parsed JSON), else
    (False, None): a malformed pointer, a missing name, an index past the end, "-", or a
    token that goes into a string, number, boolean or null."""
    parts = tokens(pointer)
    if parts is None:
        return False, None
    value = doc
    for token in parts:
        if isinstance(value, dict):
            if token not in value:
                return False, None
            value = value[token]
        elif isinstance(value, list):
            if len(token) > MAX_INDEX_DIGITS or not _INDEX.fullmatch(token):
                return False, None
            index = int(token)
            if index >= len(value):
                return False, None
            value = value[index]
        else:
            return False, None
    return True, value


def scalar_text(value: Any) -> Optional[str]:
    """A found value as a resource id: a string as it is, a number or boolean in its JSON
    spelling; None for null, an object, a list, an empty string or one over MAX_ID_CHARS."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        try:
            text = json.dumps(value)
        except ValueError:  # an integer of more digits than Python will spell
            return None
    elif isinstance(value, str):
        text = value
    else:
        return None
    return text if 0 < len(text) <= MAX_ID_CHARS else None
