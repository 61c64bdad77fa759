"""`derive_key(*parts)`: a stable operation key from the natural identifiers of an intent.

Normalisation, part by part (so the same intent always gives the same key):
- str: Unicode NFC (a composed and a decomposed "é" are one key) and surrounding whitespace
  removed. Case is kept: identifiers such as `evt_1AbC` are case-sensitive; lower-case a
  case-insensitive one (an e-mail address) yourself.
- int: decimal digits (`bool` is refused: True is not 1 for an intent).
- Decimal: the shortest plain form (`Decimal("12.50")` and `Decimal("12.5")` are "12.5").
- date: `2026-11-30`; datetime: must be timezone-aware, converted to UTC,
  `2026-11-30T14:05:00Z` (microseconds only when non-zero).
- UUID: the lower-case hyphenated form.
Refused with ValueError or TypeError, so a missing field never turns every event into one
key: None, an empty part (after stripping), float (12.1 is not exact; pass a str or Decimal),
naive datetimes, and any other type.

Encoding (so different intents never share a key): parts are joined with "|" after escaping
"%" as "%25", "|" as "%7C" and control characters as %XX (UTF-8), so no part can imitate the
separator ("|" rather than ":", which is common inside ids and times: `urn:x:1`, `14:05`).
A key longer than docs/api.md's 512 characters becomes "%sha256:" + the hex SHA-256 of the
joined form; "%s" never appears in an escaped part, so it cannot collide either.
"""
from __future__ import annotations

import hashlib
import unicodedata
import uuid
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

MAX_KEY_CHARS = 512  # docs/api.md's limit on a key, in code points


def derive_key(*parts: Any) -> str:
    """A key for `claim` from one or more natural identifiers, e.g.
    `derive_key("acme", date(2026, 11, 30))` -> `"acme|2026-11-30"`."""
    if not parts:
        raise ValueError("derive_key needs at least one part")
    joined = "|".join(_escape(_normalise(p, i)) for i, p in enumerate(parts))
    if len(joined) > MAX_KEY_CHARS:
        return "%sha256:" + hashlib.sha256(joined.encode("utf-8")).hexdigest()
    return joined


def _normalise(part: Any, index: int) -> str:
    if part is None:
        raise ValueError(f"part {index} is None: a missing identifier cannot make a key")
    if isinstance(part, bool) or isinstance(part, float):
        raise TypeError(f"part {index} is a {type(part).__name__}; pass a str, int or Decimal")
    if isinstance(part, str):
        text = unicodedata.normalize("NFC", "" + part).strip()  # "" + : a str subclass's value
    elif isinstance(part, int):
        text = str(int(part))
    elif isinstance(part, Decimal):
        if not part.is_finite():
            raise ValueError(f"part {index} is not a finite number")
        text = format(part.normalize(), "f")
    elif isinstance(part, datetime):
        if part.tzinfo is None or part.utcoffset() is None:
            raise ValueError(f"part {index} is a naive datetime; give it a timezone")
        utc = part.astimezone(timezone.utc)
        text = utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{utc.microsecond:06d}"
                                                     if utc.microsecond else "") + "Z"
    elif isinstance(part, date):
        text = part.isoformat()
    elif isinstance(part, uuid.UUID):
        text = str(part)
    else:
        raise TypeError(f"part {index} is a {type(part).__name__}; pass str, int, Decimal, "
                        "date, datetime or UUID")
    if not text:
        raise ValueError(f"part {index} is empty")
    return text


def _escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in "%|" or unicodedata.category(ch) in ("Cc", "Cs"):
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")))
        else:
            out.append(ch)
    return "".join(out)
