"""Record versions for upsert-if-newer: an integer, or an RFC 3339 timestamp compared as a UTC
instant. Both are stored as one BIGINT: the integer itself, or microseconds since the epoch,
with the kind beside it. Timestamps compare to the microsecond, as PostgreSQL's own do:
digits beyond the sixth are dropped.

A timestamp's UTC instant must fall in 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999Z:
`9999-12-31T23:59:59-23:59` is valid RFC 3339 but its instant is in the year 10000, which
no UTC timestamp can show (issue 13: such a version was stored and every later answer about
the record failed). Digits are ASCII only: Python's digit class also matches `٢`.
"""
from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Optional, Union

INT, TIME = "int", "time"
MAX_INT = 2**63 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})")

Version = Union[int, str]
# The UTC instants a timestamp version may have: those that UTC RFC 3339 can show.
MIN_TIME = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z
MAX_TIME = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z


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
    if not MIN_TIME <= micros <= MAX_TIME:
        raise ValueError("the timestamp's UTC instant is outside 0001-01-01 .. 9999-12-31")
    return TIME, micros


def show(kind: Optional[str], value: Optional[int]) -> Optional[Version]:
    """The stored version as the API shows it: the integer, or UTC RFC 3339 with `Z`.

    Total over every stored value: a row written before the range check (an instant in the
    year 10000) is shown with its five-digit year rather than failing every answer about it.
    """
    if kind is None or value is None:
        return None
    if kind == INT:
        return value
    days, micros = divmod(value, 86_400 * 1_000_000)
    year, month, day = _civil(days)
    seconds, fraction = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    text = f"{year:04d}-{month:02d}-{day:02d}T{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return text + (f".{fraction:06d}".rstrip("0") if fraction else "") + "Z"


def _civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a count of days since 1970-01-01, proleptic Gregorian, for any
    count (H. Hinnant's days_from_civil inverse; no datetime, which stops at year 9999)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day
