"""The wire forms of a destination's routing (CONTRACT.md "Routing"): its filter and its
ordering. The gateway keeps each as the JSON given and reads it with domain/route_specs
(gateway/sources.py), so its refusal names the field as route_specs does
(destination.filter.match[2].pointer: ...); the schemas say the same for /openapi.json."""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import WithJsonSchema

from keystore_service.domain import route_specs as rs
from keystore_service.domain.bulk import MAX_GLOB_CHARS

# A destination's filter (CONTRACT.md "Routing"). The service reads it with
# domain/route_specs.parse_filter, whose RouteError is the 400's message (naming the field);
# the schema below says the same for /openapi.json, all but a value's size in bytes.
_POINTER = r"^(/([^~/]|~[01])*)*$"  # RFC 6901: "" or /-prefixed tokens, ~ only as ~0 or ~1
FILTER_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "description": "Which events this destination takes: every part given must hold; {} or "
                   "null takes every event. An event it does not take is recorded as "
                   "filtered (nothing is sent). A value of equals or in is at most "
                   f"{rs.MAX_VALUE_BYTES:,} bytes of compact JSON, else 400 (no schema can "
                   "measure it)",
    "properties": {
        "event_types": {
            "type": "array", "minItems": 1, "maxItems": rs.MAX_EVENT_TYPES,
            "description": "Globs over the event's type (* any characters, ? one); an event "
                           "without a type matches none. Leave it out to take every type",
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_GLOB_CHARS,
                      "pattern": r"^[^\u0000-\u001f\u007f-\u009f]+$"}},
        "match": {
            "type": "array", "maxItems": rs.MAX_CONDITIONS,
            "description": "Conditions on the JSON body, each a pointer and exactly one of "
                           "equals (a JSON value), in (a list of them), exists (true/false)",
            "items": {
                "type": "object", "additionalProperties": False, "required": ["pointer"],
                "properties": {
                    "pointer": {"type": "string", "maxLength": rs.MAX_POINTER_CHARS,
                                "pattern": _POINTER},
                    "equals": {},
                    "in": {"type": "array", "minItems": 1, "maxItems": rs.MAX_IN_VALUES},
                    "exists": {"type": "boolean"}},
                "oneOf": [{"required": [op]} for op in ("equals", "in", "exists")]}}}}
# Kept as the JSON given: the gateway parses it (gateway/sources.py), so its refusal names the
# field as route_specs does (destination.filter.match[2].pointer: ...).
FilterSpec = Annotated[Any, WithJsonSchema(FILTER_SCHEMA)]

# A destination's ordering per key (CONTRACT.md "Routing"), read by route_specs.parse_ordering
# as the filter is (which also refuses a version with serial, and none with newer_wins).
_KEY_POINTER = r"^(/([^~/]|~[01])*)+$"  # as _POINTER, but not "" (the whole body is no key)
ORDERING_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["key", "mode"],
    # serial compares no version; newer_wins needs one
    "allOf": [{"if": {"properties": {"mode": {"const": "serial"}}},
               "then": {"not": {"required": ["version"]}}},
              {"if": {"properties": {"mode": {"const": "newer_wins"}}},
               "then": {"required": ["version"]}}],
    "description": "Per key (the value at `key`). serial: the events of a key are forwarded "
                   "one at a time, in acceptance order; one waiting for a retry holds the "
                   "later ones of its key (they show waiting_on), never another key's. "
                   "newer_wins (`version` required): an event whose version (the value at "
                   "`version`) is not newer than the last delivered one of its key is "
                   "recorded as superseded and not forwarded; a key's events go one at a "
                   "time (an earlier one that is due goes first). An event without a key (or, "
                   "newer_wins, a version that cannot be compared with the last one) is "
                   "forwarded without an order. null: no ordering",
    "properties": {
        "key": {"type": "string", "minLength": 1, "maxLength": rs.MAX_POINTER_CHARS,
                "pattern": _KEY_POINTER, "description": "a JSON Pointer, e.g. /data/object/id"},
        "mode": {"type": "string", "enum": ["serial", "newer_wins"],
                 "description": "serial (one at a time per key, in acceptance order) or newer_wins"},
        "version": {"type": "string", "minLength": 1, "maxLength": rs.MAX_POINTER_CHARS,
                    "pattern": _KEY_POINTER,
                    "description": "a JSON Pointer to a number or a string (timestamps "
                                   "with a zone compare as instants), e.g. /created"}}}
OrderingSpec = Annotated[Any, WithJsonSchema(ORDERING_SCHEMA)]

# A destination's rate (CONTRACT.md "Routing"), read by route_specs.parse_rate as the filter
# is, so its refusal names the field (destination.rate.per_second: ...).
RATE_SCHEMA = {
    "type": "object", "additionalProperties": False, "minProperties": 1, "maxProperties": 1,
    "description": "At most this many forwards a second or a minute, held across every relay, "
                   "beside max_in_flight; after an idle spell up to one second's worth (at "
                   "least 1) go at once, then one every 1/n second (or minute). null: no rate",
    "properties": {name: {"type": "integer", "minimum": 1, "maximum": rs.MAX_RATE}
                   for name in ("per_second", "per_minute")}}
RateSpec = Annotated[Any, WithJsonSchema(RATE_SCHEMA)]
