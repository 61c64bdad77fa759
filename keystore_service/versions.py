"""Record versions for upsert-if-newer: an integer, or an RFC 3339 timestamp compared as a UTC
instant. Both are stored as one BIGINT: the integer itself, or microseconds since the epoch
(every year RFC 3339 can write, 0000 to 9999, fits), with the kind beside it. Timestamps
compare to the microsecond, as PostgreSQL's own do: digits beyond the sixth are dropped.
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
    delta = (local - _EPOCH) - offset
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + int(fraction[:6].ljust(6, "0"))
    return TIME, micros


def show(kind: Optional[str], value: Optional[int]) -> Optional[Version]:
    """The stored version as the API shows it: the integer, or UTC RFC 3339 with `Z`."""
    if kind is None or value is None:
        return None
    if kind == INT:
        return value
    t = _EPOCH + timedelta(microseconds=value)
    fraction = f".{t.microsecond:06d}".rstrip("0") if t.microsecond else ""
    return f"{t:%Y-%m-%dT%H:%M:%S}{fraction}Z"
