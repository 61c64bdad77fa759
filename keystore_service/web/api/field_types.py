"""The field types of the API's bodies (docs/api.md's limits and characters), each written
once: schemas.py builds its models from them, and gateway_schemas.py and issue_schemas.py
too. Strict: no "5" for 5, no control characters, bounds in /openapi.json as in validation.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any, Literal

from annotated_types import Ge, Le
from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

from keystore_service.domain import versions
from keystore_service.service.fencing import LEASE_TOKEN_PATTERN
from keystore_service.settings import MAX_LEASE_SECONDS, MAX_TTL_SECONDS

_CONTROL_OR_SURROGATE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # Unicode Cc and Cs
# The same rule for /openapi.json (validation itself uses the regex above). Surrogates are
# left out of this spelling: many regex engines cannot name them, and valid JSON text never
# carries a lone one anyway (the body parser refuses a "\ud800" escape).
CONTROL_FREE = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"


def _no_control(value: str) -> str:
    if _CONTROL_OR_SURROGATE.search(value):
        raise ValueError("must not contain control characters or lone surrogates")
    return value


def _unprintable_ranges() -> str:
    """A regex class body of the Basic Multilingual Plane's control (Cc), format (Cf: U+200B,
    U+202E), surrogate, private-use, and line/paragraph separator (U+2028/9) characters: 17
    ranges, written with \\u escapes that Python, ECMA and the fuzzer's regex engine read alike."""
    ranges: list[list[int]] = []
    for code in range(0x10000):
        if unicodedata.category(chr(code)) in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp"):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return "".join(f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges)


# docs/api.md's "printable characters" of a fingerprint: none of the above, which break or
# hide text (U+2028 starts a new line in a log viewer, U+200B is invisible). Written once,
# used by the validator and published as the field's pattern in /openapi.json.
PRINTABLE = f"^[^{_unprintable_ranges()}]*$"
_PRINTABLE = re.compile(PRINTABLE)


def _printable(value: str) -> str:
    if not _PRINTABLE.match(value):
        raise ValueError("must be printable characters only (no control, format, separator "
                         "or private-use characters)")
    return value


def _integral(value: Any) -> Any:
    """JSON has one number type: 60.0 is the integer 60 (as in the fingerprint's canonical
    form); 60.5 stays a float and is refused by the strict int that follows."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def Text(min_length: int, max_length: int, **schema: Any):  # noqa: N802 (a type factory)
    """A string of `min_length`..`max_length` code points, no control characters."""
    return Annotated[str, StringConstraints(min_length=min_length, max_length=max_length),
                     AfterValidator(_no_control),
                     Field(json_schema_extra={"pattern": CONTROL_FREE, **schema})]


def Int(ge: int, le: int):  # noqa: N802 (a type factory)
    # annotated_types' Ge/Le, not Field(ge=...): they keep their meaning (and their JSON
    # schema) wherever the type is nested, inside Optional or a union too.
    # (The bounds go before the validator: after it, pydantic leaves them out of the schema.)
    return Annotated[int, Ge(ge), Le(le), BeforeValidator(_integral)]


# domain.ReviewKind (a test keeps them equal)
ReviewKindName = Literal["fingerprint_mismatch", "stale_lease", "delivery_failed",
                         "late_repeat", "send_unknown"]
Scope = Annotated[str, StringConstraints(min_length=1, max_length=128,
                                         pattern=r"^[A-Za-z0-9_.:\-]+$")]
Key = Text(1, 512)
Fingerprint = Annotated[str, StringConstraints(min_length=1, max_length=256),
                        AfterValidator(_printable), Field(json_schema_extra={"pattern": PRINTABLE})]
LeaseToken = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Text128 = Text(1, 128)
Text256 = Text(1, 256)


def _timestamp(value: str) -> str:
    versions.parse(value)  # ValueError with the reason
    return value


Version = Annotated[
    Int(0, versions.MAX_INT) | Annotated[str, AfterValidator(_timestamp),
                                         Field(json_schema_extra={"format": "date-time"})],
    Field(description="An integer 0..2^63-1, or an RFC 3339 timestamp with Z or an offset "
                      "(compared as a UTC instant, to the microsecond).")]


def _not_weak(token: str) -> str:
    """A proposed lease token must be random (docs/api.md: at least 128 random bits); a token
    of fewer than 8 distinct characters (lt_000..., lt_abab...) is a constant, not random:
    22 random base64url characters have fewer only once in ~10^14 draws."""
    if len(set(token[3:])) < 8:
        raise ValueError("a proposed lease token must be random (at least 128 random bits)")
    return token


ProposedToken = Annotated[str, StringConstraints(pattern=LEASE_TOKEN_PATTERN),
                          AfterValidator(_not_weak), Field(description=(
                              "A lease token the client made: lt_ and 22-64 of A-Z a-z 0-9 _ -"
                              ", at least 128 random bits. Repeating the claim with it resumes"
                              " the attempt it acquired (its answer was lost). A constant "
                              "(fewer than 8 distinct characters after lt_, as lt_000...) is "
                              "refused with 400: no schema can say 'random'."))]
TtlSeconds = Int(1, MAX_TTL_SECONDS)
LeaseSeconds = Int(1, MAX_LEASE_SECONDS)
