"""How the operators' page writes times, ages, fingerprints, versions, stored JSON and a
destination's filter for a person."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Optional

from keystore_service.domain import versions
from keystore_service.domain.route_specs import RouteError, parse_filter, parse_rate
from keystore_service.domain.deliveries import DeliveryState as Delivery  # noqa: F401 (templates)
from keystore_service.domain.records import SECOND, Micros
from keystore_service.domain.sends import SendState as Send  # noqa: F401 (templates)
from keystore_service.gateway.rules import scope_of as hook_scope  # noqa: F401 (the templates')
from keystore_service.web.ui import ui_bodies

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def instant(us: Micros) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def when(us: Optional[Micros]) -> str:
    """`2027-01-15 08:00:03 UTC` (to the second: enough for a person)."""
    return "" if us is None else f"{instant(us):%Y-%m-%d %H:%M:%S} UTC"


def iso(us: Optional[Micros]) -> str:
    """The machine-readable form for <time datetime="...">."""
    return "" if us is None else f"{instant(us):%Y-%m-%dT%H:%M:%S}Z"


def duration(seconds: float) -> str:
    """A short human span: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`."""
    s = int(max(seconds, 0))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86_400:
        h, m = divmod(s // 60, 60)
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(s // 3600, 24)
    return f"{d} d {h} h" if h else f"{d} d"


def ago(us: Optional[Micros], now: Micros) -> str:
    """`12 min ago`, or `in 3 min` for an instant still ahead."""
    if us is None:
        return ""
    span = duration(abs(now - us) / SECOND)
    return f"{span} ago" if now >= us else f"in {span}"


def short_fingerprint(fp: Optional[str]) -> str:
    """`sha256:015a3c…9f2e` for a payload hash; a client's own fingerprint up to 24
    characters as it is. The full value goes beside it (title, detail page)."""
    if fp is None:
        return "none"
    if fp.startswith("sha256:") and len(fp) > 20:
        return f"{fp[:13]}…{fp[-4:]}"
    return fp if len(fp) <= 24 else fp[:20] + "…"


def pretty_json(value: Any) -> str:
    """Stored JSON (text or parsed) indented for reading."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


LABELS = {"review_id": "open review", "result_resource_id": "result resource id",
          "lease_expires_at": "lease until", "on_stale": "on stale"}


def field_label(name: str) -> str:
    """A record field's name for a person."""
    return LABELS.get(name, name.replace("_", " "))


def version(kind: Optional[str], value: Optional[int]) -> str:
    """A stored version as the API shows it: the integer, or a timestamp in UTC RFC 3339
    (`2026-01-01T00:00:00Z`), never the microseconds it is stored as."""
    shown = versions.show(kind, value)
    return "" if shown is None else str(shown)


def field_value(name: str, value: Any, snapshot: Optional[dict] = None) -> str:
    """A value of an audit snapshot: instants (`*_at`) as times, the version by the
    snapshot's version_kind, the rest as JSON."""
    if value is None:
        return "—"
    if name.endswith("_at") and isinstance(value, int):
        return when(value)
    if name == "version" and isinstance(value, int) and snapshot:
        return version(snapshot.get("version_kind"), value)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def visible(text: str) -> str:
    """Text from outside (a destination's answer) with invisible characters made visible."""
    return ui_bodies.visible(text)


FILTER_VALUE_CHARS = 120  # of one `equals` or `in` value on the page: an id reads whole; the
#                           API's answer (GET /v1/sources/<name>) has every value as it is
FILTER_IN_SHOWN = 5  # values of one `in` on the page (up to 100 are allowed), then how many more


@dataclass(frozen=True, slots=True)
class Condition:
    """A filter's `match` condition as the page writes it: its pointer, its op ("equals",
    "in", "exists"), its values' JSON texts (none for exists), how many `in` values are not
    shown, and for exists whether the pointer must name something."""

    pointer: str
    op: str
    values: tuple[str, ...]
    more: int = 0
    exists: bool = True


@dataclass(frozen=True, slots=True)
class FilterShown:
    """A destination's filter for a person: its type globs (None: every type) and its
    conditions; `unreadable` when the stored form does not parse (never an error page)."""

    event_types: Optional[tuple[str, ...]]
    match: tuple[Condition, ...]
    unreadable: bool = False


def destination_filter(source: Any) -> Optional[FilterShown]:
    """The filter of the source's destination (its options' `forward.filter`, stored in the
    normal form) with invisible characters made visible and long values cut; None when the
    destination has none. Jinja escapes what this returns."""
    try:
        given = source.forward.get("filter")
        if given is None:
            return None
        f = parse_filter(given)
    except (RouteError, ValueError, AttributeError):
        return FilterShown(None, (), unreadable=True)
    types = None if f.event_types is None else tuple(_line(g) for g in f.event_types)
    return FilterShown(types, tuple(_condition(m) for m in f.match))


def destination_pace(source: Any) -> Optional[str]:
    """A destination's rate beside its max_in_flight, for a person, e.g. "5 a second, at most
    4 at once" (the options' `forward.rate`, stored in the normal form); None without a rate
    (the page says nothing new). A stored rate that does not read is said so, never an error
    page."""
    at_once = f"at most {source.max_in_flight:,} at once"
    try:
        given = source.forward.get("rate")
        if given is None:
            return None
        rate = parse_rate(given)
    except (RouteError, ValueError, AttributeError):
        return f"Rate: its stored form does not read; {at_once}"
    unit = "second" if rate.per_seconds == 1 else "minute"
    return f"Rate: {rate.count:,} a {unit}, {at_once}"


def _condition(m: Any) -> Condition:
    if m.op == "exists":
        return Condition(_line(m.pointer), m.op, (), exists=bool(m.value))
    values = (m.value,) if m.op == "equals" else tuple(m.value)
    shown = tuple(_value_text(v) for v in values[:FILTER_IN_SHOWN])
    return Condition(_line(m.pointer), m.op, shown, len(values) - len(shown))


def _value_text(value: Any) -> str:
    text = _line(json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": ")))
    return text if len(text) <= FILTER_VALUE_CHARS else text[:FILTER_VALUE_CHARS] + "…"


def _line(text: str) -> str:
    """One line of text from an operator with its invisible characters and line breaks
    made visible (a pointer may hold a LF or a U+202E)."""
    return visible(text).replace("\n", "\\u000a")
