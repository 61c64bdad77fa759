"""Routing an event to a source's destinations (CONTRACT.md, "Routing"): which events a
destination takes (its filter) and what orders them (a key and, for newer_wins, a version).
Pure: the parsed forms and the rules over an event's type and body. Reading what an
operator wrote into these forms is domain/route_specs.py.

A body is read as JSON once, as Python's json reads it, with one change: a number written
with a fraction or an exponent is an IEEE double, and one whose value is whole is that
integer (1.0 is 1, -0.0 is 0), while a number written as an integer is exact at any size.
Two values are equal when their canonical texts are: compact, keys sorted, strings as they
are, so true is not 1 and "1" is not 1; NaN and the infinities (1e400 reads as infinity)
have no text and equal nothing. A body that is not UTF-8 JSON, or nests deeper than json
reads, is no JSON: nothing in it exists.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, Optional, Union

from keystore_service.domain.bulk import glob_matches
from keystore_service.domain.pointers import resolve

Version = Union[int, float, str]
NOT_JSON = object()  # what read_json gives for a body that is no JSON
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# RFC 3339 with its zone; re's [0-9] is ASCII only, so full-width "２０２６" is no timestamp.
_TIMESTAMP = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ]([0-9]{2}:[0-9]{2}:[0-9]{2})"
                        r"(?:\.([0-9]+))?([Zz]|[+-][0-9]{2}:[0-9]{2})")


class OrderingMode(StrEnum):
    SERIAL = "serial"  # one at a time per key, in acceptance order
    NEWER_WINS = "newer_wins"  # one not newer than the last delivered of its key is not sent


@dataclass(frozen=True)
class Match:
    """One condition: `equals` a JSON value, `in` a tuple of them, `exists` True or False."""
    pointer: str
    op: Literal["equals", "in", "exists"]
    value: Any
    _texts: frozenset = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        values = () if self.op == "exists" else (self.value,) if self.op == "equals" else self.value
        texts = (canonical_text(_reread(v)) for v in values)
        object.__setattr__(self, "_texts", frozenset(t for t in texts if t is not None))


@dataclass(frozen=True)
class Filter:
    event_types: Optional[tuple[str, ...]]  # None: every type (and an event without one)
    match: tuple[Match, ...]


@dataclass(frozen=True)
class Rate:
    count: int
    per_seconds: int  # 1 for per_second, 60 for per_minute


@dataclass(frozen=True)
class Ordering:
    key: str
    mode: OrderingMode
    version: Optional[str]  # newer_wins only


def _number(text: str) -> Union[int, float]:
    value = float(text)
    return int(value) if value.is_integer() else value


def read_json(body: bytes) -> Any:
    """The body as JSON, numbers as the module says; NOT_JSON when it is none."""
    try:
        return json.loads(body.decode("utf-8"), parse_float=_number)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, too deep, too many digits
        return NOT_JSON


def _reread(value: Any) -> Any:
    """A value given in Python (an operator's `equals`) read as a body's would be."""
    try:
        return read_json(json.dumps(value).encode("ascii"))  # ASCII: \u escapes
    except (TypeError, ValueError, RecursionError):
        return NOT_JSON


def canonical_text(value: Any) -> Optional[str]:
    """The compact, key-sorted JSON of a value read by read_json; None for one holding NaN
    or an infinity (or nesting too deep to write)."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def _find(doc: Any, pointer: str) -> tuple[bool, Any]:
    return (False, None) if doc is NOT_JSON else resolve(doc, pointer)


def matches(f: Filter, event_type: Optional[str], body: bytes) -> bool:
    """Whether the event passes every part the filter gives (an empty filter passes all)."""
    if f.event_types is not None and (
            event_type is None or not any(glob_matches(g, event_type) for g in f.event_types)):
        return False
    doc = read_json(body) if f.match else NOT_JSON
    return all(_holds(m, doc) for m in f.match)


def _holds(m: Match, doc: Any) -> bool:
    found, value = _find(doc, m.pointer)
    if m.op == "exists":
        return found == m.value  # null exists; in a body that is no JSON nothing does
    return found and canonical_text(value) in m._texts


def ordering_key(body: bytes, pointer: str) -> Optional[str]:
    """`sha256:<hex>` of the canonical text of the value at `pointer` (a fixed length, so a
    huge key cannot bloat an index); None when the body is no JSON, the pointer names
    nothing or null, or the value holds NaN or an infinity."""
    found, value = _find(read_json(body), pointer)
    text = canonical_text(value) if found and value is not None else None
    if text is None:
        return None
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def version_of(body: bytes, pointer: str) -> Optional[Version]:
    """The event's version: the number or string at `pointer`; None for anything else."""
    found, value = _find(read_json(body), pointer)
    return value if found and _comparable(value) is not None else None


def newer(candidate: Any, last: Any) -> Optional[bool]:
    """True when `candidate` is strictly newer than `last`, False when it is not (equal is
    not newer), None when they cannot be compared: both must be numbers (exact, whatever
    their size), both timestamps with a zone (as instants, every digit of the fraction), or
    both other strings (code point order; a string holding a lone surrogate is none)."""
    a, b = _comparable(candidate), _comparable(last)
    if a is None or b is None or a[0] != b[0]:
        return None
    return a[1] > b[1]


def _comparable(value: Any) -> Optional[tuple[str, Any]]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return "number", value  # Python compares an int with a float exactly
    if isinstance(value, str):
        if not _is_text(value):  # a lone surrogate ("\ud800" in the body): no text to store
            return None
        instant = _instant(value)
        return ("text", value) if instant is None else ("time", instant)
    return None


def _is_text(value: str) -> bool:
    """Whether `value` is text UTF-8 can carry (no lone surrogate), as the tables keep it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _instant(text: str) -> Optional[tuple[Any, str]]:
    """(whole seconds since the epoch, fraction digits without trailing zeros): tuples that
    order as the instants do (digit strings of a fraction order as their values)."""
    m = _TIMESTAMP.fullmatch(text)
    if m is None:
        return None
    date, time, fraction, zone = m.groups()
    try:
        whole = datetime.fromisoformat(f"{date}T{time}{'+00:00' if zone in 'Zz' else zone}")
    except ValueError:  # 2026-02-30, 23:59:60, an offset of 24 hours
        return None
    return whole - _EPOCH, (fraction or "").rstrip("0")
