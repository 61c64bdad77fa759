"""Query-string values of the operator calls, read as text by rules of their own: pydantic's
lax parsing would take "5.0", "+5" or " 5" for 5, and "0" for the date 1970-01-01. Each rule
is also written into /openapi.json (pattern, bounds), so that a client, or a fuzzer, knows
what is accepted. schemas.py builds the query models from these types; the operators' page
and `keystore report` read a date with report_day().
"""
from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any

from annotated_types import Ge, Le
from pydantic import BeforeValidator, Field, StringConstraints, WithJsonSchema

_DIGITS = re.compile("[0-9]{1,19}")  # ASCII only: \d and str.isdigit() also take "٢" and "²"


def _ascii_int(value: Any) -> Any:
    if isinstance(value, str) and not _DIGITS.fullmatch(value):
        raise ValueError("a whole number, written in the digits 0-9")
    return int(value) if isinstance(value, str) else value


def QueryInt(ge: int, le: int):  # noqa: N802 (a type factory)
    """A whole number in a query string: ASCII digits only, then ge..le."""
    return Annotated[int, Ge(ge), Le(le), BeforeValidator(_ascii_int)]


# A review cursor is what the service gave out as next_cursor: unpadded base64url of the JSON
# text "[opened_at, id]", two integers 0..2^63-1. Its shape is published so that a client (or
# a fuzzer) knows one; a cursor of that shape the service never gave out is still a 400.
CURSOR_PATTERN = "^[A-Za-z0-9_-]+$"
CURSOR_MIN, CURSOR_MAX = 8, 56  # "[0, 0]": 6 bytes; two 19-digit numbers: 42 bytes
Cursor = Annotated[str, StringConstraints(min_length=CURSOR_MIN, max_length=CURSOR_MAX,
                                          pattern=CURSOR_PATTERN),
                   Field(description="The next_cursor of the previous page, as it was given. "
                                     "Another string of this shape is refused with 400: "
                                     "which ones the service gave out, no schema can say.")]

# Report days. The first is the epoch the clock counts from (no record is older); the last is
# the day before 9999-12-31, whose end (the next midnight) is not a date Python can hold. The
# chart of the 14 days before a day reaches back to 1969-12-19, which counts fine (as nothing).
FIRST_REPORT_DAY, LAST_REPORT_DAY = dt.date(1970, 1, 1), dt.date(9999, 12, 30)
_DAY = re.compile("[0-9]{4}-[0-9]{2}-[0-9]{2}")  # ASCII digits, as above
# The same rule for /openapi.json, range included: years 1970-9998, and 9999 but its last day
# (format "date" then says which days the calendar has).
_MM_DD = "(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
DAY_PATTERN = (f"^((19[7-9][0-9]|[2-8][0-9]{{3}}|9[0-8][0-9]{{2}}|99[0-8][0-9]|999[0-8])-{_MM_DD}"
               "|9999-(0[1-9]|1[01])-(0[1-9]|[12][0-9]|3[01])|9999-12-(0[1-9]|[12][0-9]|30))$")


def report_day(value: Any) -> dt.date:
    """The day a report is asked for: strictly YYYY-MM-DD in ASCII digits, a day of the
    calendar, FIRST_REPORT_DAY..LAST_REPORT_DAY. Raises ValueError saying which rule failed.
    The API, the operators' page and `keystore report --date` all read a date with this."""
    if not isinstance(value, str) or not _DAY.fullmatch(value):
        raise ValueError("a date is YYYY-MM-DD, in the digits 0-9")
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value} is not a day of the calendar") from None
    if not FIRST_REPORT_DAY <= day <= LAST_REPORT_DAY:
        raise ValueError(f"a report date is from {FIRST_REPORT_DAY} to {LAST_REPORT_DAY}")
    return day


ReportDay = Annotated[dt.date, BeforeValidator(report_day), WithJsonSchema({
    "type": "string", "format": "date", "pattern": DAY_PATTERN,
    "description": f"A UTC day, {FIRST_REPORT_DAY} to {LAST_REPORT_DAY}."})]
