"""A source's destinations as the API gives them: `destination` (the v1.1 form, one
destination named `default`) or `destinations` (up to 10, each named), read into Planned rows
with their forwarding choices in route_specs' normal form. The first destination keeps its
choices in its source's row (config `forward`, sealed `headers` and `destination_secret`, as
v1.1 stored them); each later one in its own row (hook_destinations.config and .sealed,
migration 0023)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from keystore_service import errors
from keystore_service.domain import route_specs
from keystore_service.domain.records import SECOND
from keystore_service.domain.routing import Ordering


def dotted(at: str) -> str:
    """A field's path as details.field gives it: destinations[2].url is destinations.2.url
    (the form of a schema's errors)."""
    return at.replace("[", ".").replace("]", "")


@dataclass(frozen=True, slots=True)
class Planned:
    """A destination as given: where, its limits, its forwarding choices and secrets."""

    name: str
    url: str
    timeout_seconds: int
    max_in_flight: Optional[int]  # None: the source's (create) or as it is (change)
    forward: dict
    headers: dict[str, str]
    secret: Optional[str]
    at: str  # its field in the request, for a refusal: destinations[2]

    def row(self, max_in_flight: int) -> dict:
        """Its hook_destinations columns (its rate's debt starts again)."""
        return {"url": self.url, "timeout_seconds": self.timeout_seconds,
                "max_in_flight": self.max_in_flight or max_in_flight,
                "rate_interval_us": interval(self.forward), "rate_tat": None}


def planned(one: Any, many: Optional[list], required: bool, default_name: str = "default"
            ) -> Optional[list[Planned]]:
    """The destinations of a request's `destination` (named `default_name`) or
    `destinations`; None when neither is given and none is `required`. InvalidRequest for
    both, for neither when required, and for a name given twice."""
    if one is not None and many is not None:
        raise errors.InvalidRequest("give destination (one) or destinations (several), not "
                                    "both", details={"field": "destinations"})
    if one is None and many is None:
        if required:
            raise errors.InvalidRequest("a source needs its destination (or destinations)",
                                        details={"field": "destination"})
        return None
    given = [(one, default_name, "destination")] if one is not None else [
        (d, d.name, f"destinations[{i}]") for i, d in enumerate(many)]
    seen: set[str] = set()
    out = []
    for dest, name, at in given:
        if name in seen:
            raise errors.InvalidRequest(f"{at}.name: {name!r} is given twice: each destination "
                                        "has a name of its own",
                                        details={"field": dotted(f"{at}.name")})
        seen.add(name)
        out.append(Planned(name, dest.url, dest.timeout_seconds,
                           getattr(dest, "max_in_flight", None), forward_of(dest, at),
                           dict(dest.headers), dest.secret, at))
    return out


def forward_of(dest: Any, at: str = "destination") -> dict:
    """The destination's forwarding choices kept with the source's options: its filter and
    its ordering (each absent when it has none) in route_specs' normal form. InvalidRequest
    naming the field for a filter or an ordering route_specs refuses."""
    forward = {"retry_statuses": sorted(set(dest.retry_statuses)),
               "delivered_header": dest.delivered_header}
    if dest.rate is not None:
        forward["rate"] = _rate(dest.rate, f"{at}.rate")
    if dest.filter is not None:
        try:
            parsed = route_specs.parse_filter(dest.filter, at=f"{at}.filter")
        except route_specs.RouteError as exc:
            raise errors.InvalidRequest(str(exc), details={"field": dotted(f"{at}.filter")}) \
                from None
        forward["filter"] = route_specs.filter_json(parsed)
    if dest.ordering is not None:
        forward["ordering"] = route_specs.ordering_json(_ordering(dest.ordering,
                                                                  f"{at}.ordering"))
    return forward


def _ordering(given: Any, at: str) -> Ordering:
    """A destination's ordering read by route_specs."""
    try:
        parsed = route_specs.parse_ordering(given, at=at)
    except route_specs.RouteError as exc:
        raise errors.InvalidRequest(str(exc), details={"field": dotted(at)}) from None
    return parsed


def held_by(forward: dict) -> tuple[Optional[str], Optional[str]]:
    """The key pointer and mode of the ordering in `forward` (a destination's stored
    forwarding options) that the take holds events by (gateway/ordering.py), or (None,
    None)."""
    given = forward.get("ordering") or {}
    return given.get("key"), given.get("mode")


def _rate(given: Any, at: str) -> dict:
    """A destination's rate in its normal form ({"per_second": n} or {"per_minute": n});
    InvalidRequest naming the field (destination.rate.per_second: ...) for one route_specs
    refuses."""
    if isinstance(given, dict):  # JSON has one number type: 5.0 is 5, as Int reads it
        given = {k: int(v) if isinstance(v, float) and v.is_integer() else v
                 for k, v in given.items()}
    try:
        rate = route_specs.parse_rate(given, at=at)
    except route_specs.RouteError as exc:
        raise errors.InvalidRequest(str(exc), details={"field": dotted(at)}) from None
    return {"per_second" if rate.per_seconds == 1 else "per_minute": rate.count}


def interval(forward: dict) -> Optional[int]:
    """The microseconds between two forwards at the destination's rate (None: no rate), as
    the take's GCRA reads them (storage/take.py): rounded up, so the rate is never exceeded
    (7/s: 142,858 us)."""
    rate = forward.get("rate")
    if rate is None:
        return None
    per, count = (1, rate["per_second"]) if "per_second" in rate else (60, rate["per_minute"])
    return -(-per * SECOND // count)
