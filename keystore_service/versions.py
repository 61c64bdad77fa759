"""Record versions for upsert-if-newer: an integer, or an RFC 3339 timestamp compared as a UTC
instant. Both are stored as one BIGINT: the integer itself, or nanoseconds since the epoch
(which spans the years 1678 to 2261), with the kind beside it.
"""
from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Optional, Union

INT, TIME = "int", "time"
MAX_INT = 2**63 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})")

Version = Union[int, str]


def parse(value: Version) -> tuple[str, int]:
    """(kind, comparable integer) of a version; ValueError if it is neither kind."""
    if isinstance(value, bool):
        raise ValueError("a version is an integer or an RFC 3339 timestamp")
    if isinstance(value, int):
        if not 0 <= value <= MAX_INT:
            raise ValueError("an integer version is between 0 and 2^63-1")
        return INT, value
    m = _RFC3339.fullmatch(value)
    if m is None:
        raise ValueError("a timestamp version is RFC 3339 with Z or an offset, "
                         "such as 2026-11-30T10:00:00Z")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction, zone = m.group(7) or "", m.group(8)
    offset = timedelta(0)
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        offset = sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
        if abs(offset) >= timedelta(hours=24) or int(zone[4:6]) > 59:
            raise ValueError("the timestamp's offset is out of range")
    try:
        local = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError as exc:
        raise ValueError(f"not a valid timestamp: {exc}") from None
    delta = local - offset - _EPOCH
    nanos = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + int(fraction.ljust(9, "0"))
    if not -(2**63) <= nanos <= MAX_INT:
        raise ValueError("the timestamp is out of range (years 1678 to 2261)")
    return TIME, nanos


def show(kind: Optional[str], value: Optional[int]) -> Optional[Version]:
    """The stored version as the API shows it: the integer, or UTC RFC 3339 with `Z`."""
    if kind is None or value is None:
        return None
    if kind == INT:
        return value
    seconds, nanos = divmod(value, 1_000_000_000)
    t = _EPOCH + timedelta(seconds=seconds)
    fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
    return f"{t:%Y-%m-%dT%H:%M:%S}{fraction}Z"
