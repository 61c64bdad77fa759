"""The gateway's rules, pure (no I/O, no clock: `now` is given, in microseconds):
what an arriving delivery is, what a destination's answer means, when the next attempt is,
and which headers a forward carries. docs/webhooks/README.md's tables, as code.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Optional

from keystore_service.domain import canonical
from keystore_service.domain import records as domain
from keystore_service.domain import route_specs
from keystore_service.domain.records import SECOND, Micros, Record
from keystore_service.domain.routing import Filter, matches

SCOPE_PREFIX = domain.HOOK_SCOPE_PREFIX  # the gateway's records; reserved (claims: 403)
is_hook_scope = domain.is_hook_scope
MAX_BACKOFF_SECONDS = 600  # docs/webhooks/README.md: after try n, uniform(0, min(600, 2^(n-1))) s
ANSWER_KEPT_BYTES = 4096  # of a destination's answer, in the attempt and the record's result
MAX_DELTA_DIGITS = 12  # a Retry-After of more digits is over 30,000 years: the bound holds


def scope_of(source_name: str) -> str:
    return SCOPE_PREFIX + source_name


# --- an arriving delivery -------------------------------------------------------------------

class Arrival(StrEnum):
    NEW = "accepted"  # no record: accept (202)
    NEW_INCARNATION = "accepted_again"  # the record expired: accept afresh (202)
    DUPLICATE = "duplicate"  # seen, same body: 200, nothing forwarded
    HELD = "held"  # seen, other body: 200, held for a person, nothing forwarded


def decide_arrival(record: Optional[Record], fingerprint: str, now: Micros) -> Arrival:
    """A delivery of an event id whose record is `record`, by the ingest table."""
    if record is None:
        return Arrival.NEW
    if domain.expired(record, now):
        return Arrival.NEW_INCARNATION
    if domain.fingerprints_differ(record.fingerprint, fingerprint):
        return Arrival.HELD
    return Arrival.DUPLICATE


def body_fingerprint(body: bytes, volatile: Iterable[str] = ()) -> str:
    """RFC 8785 of the body when it parses as I-JSON (without the provider's `volatile`
    fields, which change between resends of one event), else SHA-256 of the raw bytes."""
    try:
        value = canonical.parse_json_value(body)
        for pointer in volatile:
            value = _without(value, pointer)
        return canonical.fingerprint(value)
    except ValueError:
        return "sha256-raw:" + hashlib.sha256(body).hexdigest()


def _without(value, pointer: str):
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    if not parts or not isinstance(value, dict):
        return value
    head, rest = parts[0], "/".join(parts[1:])
    if head not in value:
        return value
    if not rest:
        return {k: v for k, v in value.items() if k != head}
    return {**value, head: _without(value[head], "/" + rest)}


# --- a destination's answer -----------------------------------------------------------------

class Outcome(StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"
    FAILED = "failed"
    FILTERED = "filtered"  # the destination's filter does not take it: no request was made
    SUPERSEDED = "superseded"  # a newer version of its key was delivered: no request was made


RETRYABLE = frozenset({408, 409, 425, 429})


def classify(status: Optional[int], retry_statuses: Iterable[int] = (),
             marked: bool = True) -> Outcome:
    """docs/webhooks/README.md's table: 2xx delivered; 408, 409, 425, 429, 5xx, no connection or a
    timeout (status None) retried; 1xx, 3xx (redirects are not followed), other 4xx fail.

    Two choices of the destination's, for workflows that answer before they can take an
    event (n8n while it starts: 200 "n8n is starting up", then 404 until its webhooks are
    registered): `retry_statuses` (4xx) are retried too, and a 2xx without the destination's
    `delivered_header` (`marked` False) is retried instead of counted as delivered."""
    if status is None or status in RETRYABLE or 500 <= status <= 599 \
            or status in retry_statuses:
        return Outcome.RETRY
    if 200 <= status <= 299:
        return Outcome.DELIVERED if marked else Outcome.RETRY
    return Outcome.FAILED


def retry_after(header: Optional[str], now: Micros, max_seconds: int) -> Optional[Micros]:
    """A Retry-After header as an instant, at most `max_seconds` (the source's
    max_pause_seconds) from `now`: delta-seconds (ASCII digits only, however many) or an
    HTTP date (one in the past is `now`); None when absent or unreadable (a sign, other
    scripts' digits, a date without a zone or beyond the year 9999, garbage)."""
    if not header:
        return None
    text = header.strip()
    cap = now + max_seconds * SECOND
    if text.isascii() and text.isdigit():
        if len(text) > MAX_DELTA_DIGITS:  # beyond any bound (and int() refuses 4,300+)
            return cap
        return min(now + int(text) * SECOND, cap)
    try:
        when = parsedate_to_datetime(text)
        at = int(when.timestamp() * SECOND)
    except (TypeError, ValueError, IndexError, OverflowError, OSError):
        return None
    if when.tzinfo is None:
        return None
    return min(max(now, at), cap)


def next_attempt(attempt: int, now: Micros, after: Optional[Micros], window_end: Micros,
                 random: Callable[[], float]) -> Optional[Micros]:
    """When to try again after attempt `attempt` (1, 2, ...) failed: full jitter,
    uniform(0, min(600, 2^(attempt-1))) seconds, or the destination's Retry-After if later;
    None when that falls after the retry window (the event fails now)."""
    ceiling = min(MAX_BACKOFF_SECONDS, 2 ** min(attempt - 1, 30))
    when = now + int(random() * ceiling * SECOND)
    if after is not None and after > when:
        when = after
    return None if when > window_end else when


def pauses_source(status: Optional[int], after: Optional[Micros]) -> bool:
    """A 429 or 503 *with* a readable Retry-After pauses the whole source until then (at
    most its max_pause_seconds: retry_after)."""
    return status in (429, 503) and after is not None


# --- a destination's filter (CONTRACT.md, "Routing") -----------------------------------------

def read_filter(forward: dict) -> tuple[Optional[Filter], Optional[str]]:
    """A destination's stored filter (route_specs' normal form, in its forwarding options)
    read, or why it cannot be (None, None without one). One stored by a version of looser
    limits is neither ignored (its events would reach a destination that refused them) nor
    a refusal of all (they would be filtered unseen): its forwards are retried with this
    error, the source's last error on the page, until an operator mends it."""
    given = forward.get("filter")
    if given is None:
        return None, None
    try:
        return route_specs.parse_filter(given), None
    except route_specs.RouteError as exc:
        return None, f"the source's stored filter cannot be used: {exc}"


def takes(f: Optional[Filter], event_type: Optional[str], body: Optional[bytes]) -> bool:
    """Whether a destination of filter `f` takes the event. Without its body (no longer
    kept) it is judged by its type alone: its `match` cannot be read, so it goes on as
    before filters (and fails for want of a body)."""
    if f is None:
        return True
    if body is None:
        return matches(Filter(f.event_types, ()), event_type, b"")
    return matches(f, event_type, body)


# --- a forward's headers --------------------------------------------------------------------

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                        "te", "trailer", "trailers", "transfer-encoding", "upgrade", "host",
                        "content-length", "expect", "proxy-connection"})


def kept_headers(pairs: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The provider's headers an event keeps for its forwards: all but hop-by-hop ones, Host
    and Content-Length (Authorization and cookies are not the provider's to pass on)."""
    drop = HOP_BY_HOP | {"authorization", "cookie"}
    return [[k, v] for k, v in pairs if k.lower() not in drop]


def header_id(event_id: str) -> str:
    """An event id as the forward's Idempotency-Key and webhook-id carry it: every byte of
    its UTF-8 outside printable ASCII, and `%`, percent-encoded (`%XX`, upper case), so any
    id fits a header (urllib3 sent them as Latin-1: `東京|48` could never be forwarded, issue
    25 item 7) and none can break one (CR, LF and every control character are encoded). The
    space is encoded too: a header's value loses its leading and trailing spaces, and two
    ids must never arrive as one. Decoding it once (decodeURIComponent, urllib.parse.unquote)
    gives the id back as recorded."""
    if all("!" <= ch <= "~" and ch != "%" for ch in event_id):
        return event_id  # the usual case: evt_1QhN..., a GitHub delivery's UUID
    return "".join(ch if "!" <= ch <= "~" and ch != "%" else "".join(
        f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")) for ch in event_id)


def forward_headers(provider: list[list[str]], configured: dict[str, str], event_id: str,
                    attempt: int, signature: Optional[dict[str, str]]) -> dict[str, str]:
    """Headers in docs/webhooks/README.md's precedence, later winning: the provider's own, the
    destination's configured ones, the gateway's (Idempotency-Key: the event id as
    header_id() gives it, Keystore-Attempt, and the Standard Webhooks signature when the
    destination has a secret: its webhook-id must be header_id() of the id too, and signed
    as such)."""
    out: dict[str, str] = {}
    names: dict[str, str] = {}

    def put(name: str, value: str) -> None:
        old = names.get(name.lower())
        if old is not None:
            del out[old]
        names[name.lower()] = name
        out[name] = value
    for name, value in provider:
        put(name, value)
    for name, value in configured.items():
        put(name, value)
    put("Idempotency-Key", header_id(event_id))
    put("Keystore-Attempt", str(attempt))
    for name, value in (signature or {}).items():
        put(name, value)
    return out


def answer_text(raw: bytes) -> str:
    """Up to 4 KiB of a destination's answer, as text a person can read: bytes that are not
    UTF-8, and NUL, which PostgreSQL's text refuses (a settle that cannot be written would
    be forwarded again at the end of every lease), become U+FFFD."""
    return raw[:ANSWER_KEPT_BYTES].decode("utf-8", "replace").replace("\x00", "\ufffd")


def result_of(status: Optional[int], answer: str, error: Optional[str] = None) -> str:
    """The record's result (canonical JSON) once delivered or given up: the destination's
    last status and answer, or the error that stood for it."""
    result: dict = {"body": answer if error is None else {"error": error, "answer": answer}}
    if status is not None:
        result["status_code"] = status
    return canonical.canonical(result).decode("utf-8")


def filtered_result() -> str:
    """The record's result (canonical JSON) of an event its destination's filter does not
    take: nothing was sent, so there is no status and no answer."""
    return canonical.canonical({"filtered": True}).decode("utf-8")


def window_end(window_start: Micros, retry_window_seconds: int) -> Micros:
    return window_start + retry_window_seconds * SECOND
