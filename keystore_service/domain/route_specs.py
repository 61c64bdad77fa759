"""What an operator writes for a destination's routing (CONTRACT.md, "Routing"), read into
domain/routing.py's forms. Each parse_* takes the parsed JSON and raises RouteError (the
API's 400) naming the field that is off, e.g. `filter.match[2].pointer: not a JSON Pointer`;
`at` is that field's path, so a caller can say `destinations[1].filter`. Types are JSON's and
strict: true is no number, 5.0 no count, null no value but of `equals` and `in`.
"""
from __future__ import annotations

import json
import re
from typing import Any

from keystore_service.domain.bulk import MAX_GLOB_CHARS
from keystore_service.domain.names import NAME_PATTERN
from keystore_service.domain.pointers import valid
from keystore_service.domain.routing import Filter, Match, Ordering, OrderingMode, Rate

MAX_DESTINATIONS = 10  # per source (the contract's "up to 10"): each is a queue to watch
MAX_EVENT_TYPES = 20  # globs in a filter: a list a person reads, not a catalogue of types
MAX_CONDITIONS = 10  # match conditions in a filter: each is a pointer read for every event
MAX_POINTER_CHARS = 256  # a path into a body, not a document
MAX_IN_VALUES = 100  # values of an `in`: ids a person keeps up to date, not a table
MAX_VALUE_BYTES = 1024  # an `equals` or `in` value's compact JSON: an id or a small object
MAX_RATE = 1_000_000  # a rate's count: far beyond what one destination can take
DESTINATION_NAME_PATTERN = NAME_PATTERN  # a name as a source's and a connection's (domain/names)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # as gateway_schemas.TypeGlob refuses
_OPS = ("equals", "in", "exists")
_MODES = tuple(m.value for m in OrderingMode)


class RouteError(ValueError):
    """A filter, rate or ordering that cannot be used; the message names the field."""


def parse_filter(obj: Any, at: str = "filter") -> Filter:
    """`{"event_types": [globs], "match": [{"pointer", "equals" | "in" | "exists"}]}`, both
    optional (`{}` takes every event); RouteError if anything is off."""
    _fields(obj, at, ("event_types", "match"))
    types = obj.get("event_types")
    if "event_types" in obj:
        types = tuple(_glob(g, f"{at}.event_types[{i}]") for i, g in enumerate(_list(
            types, f"{at}.event_types", MAX_EVENT_TYPES,
            "take no event: leave event_types out to take every type")))
    conditions = _list(obj.get("match", []), f"{at}.match", MAX_CONDITIONS, None)
    return Filter(types, tuple(_match(c, f"{at}.match[{i}]") for i, c in enumerate(conditions)))


def filter_json(f: Filter) -> dict:
    """The normal form of a filter, as stored and shown: only the parts it has (no
    `event_types` when it takes every type, no `match` without conditions), each condition
    `{"pointer", <op>: value}` with an `in`'s values as a list. parse_filter(filter_json(f))
    is f."""
    out: dict = {}
    if f.event_types is not None:
        out["event_types"] = list(f.event_types)
    if f.match:
        out["match"] = [{"pointer": m.pointer, m.op: list(m.value) if m.op == "in" else m.value}
                        for m in f.match]
    return out


def parse_rate(obj: Any, at: str = "rate") -> Rate:
    """`{"per_second": n}` or `{"per_minute": n}`, 1 <= n <= MAX_RATE; RouteError if not."""
    _fields(obj, at, ("per_second", "per_minute"))
    name = _one_of(obj, at, ("per_second", "per_minute"))
    count = obj[name]
    if isinstance(count, bool) or not isinstance(count, int):
        raise RouteError(f"{at}.{name}: must be a whole number, not {_kind(count)}")
    if not 1 <= count <= MAX_RATE:
        raise RouteError(f"{at}.{name}: must be between 1 and {MAX_RATE:_}, not {count}")
    return Rate(count, 1 if name == "per_second" else 60)


def parse_ordering(obj: Any, at: str = "ordering") -> Ordering:
    """`{"key": pointer, "mode", "version": pointer (newer_wins only, and required there)}`;
    RouteError if anything is off, "" as either pointer too."""
    _fields(obj, at, ("key", "mode", "version"))
    for name in ("key", "mode"):
        if name not in obj:
            raise RouteError(f"{at}.{name}: required")
    mode = obj["mode"]
    if not isinstance(mode, str) or mode not in _MODES:
        raise RouteError(f"{at}.mode: must be one of {', '.join(_MODES)}")
    key = _pointer(obj["key"], f"{at}.key", "key")
    if mode == OrderingMode.SERIAL and "version" in obj:
        raise RouteError(f"{at}.version: only newer_wins compares versions: leave it out")
    if mode == OrderingMode.NEWER_WINS and "version" not in obj:
        raise RouteError(f"{at}.version: required for newer_wins (a pointer such as /created)")
    version = _pointer(obj["version"], f"{at}.version", "version") if "version" in obj else None
    return Ordering(key, OrderingMode(mode), version)


def ordering_json(o: Ordering) -> dict:
    """The normal form of an ordering, as stored and shown: `key` and `mode`, and `version`
    for newer_wins only. parse_ordering(ordering_json(o)) is o."""
    out: dict = {"key": o.key, "mode": o.mode.value}
    if o.version is not None:
        out["version"] = o.version
    return out


def _kind(value: Any) -> str:
    return {bool: "true or false", int: "a whole number", float: "a number", str: "a string",
            list: "a list", dict: "an object", type(None): "null"}.get(type(value), "that")


def _fields(obj: Any, at: str, known: tuple[str, ...]) -> None:
    if not isinstance(obj, dict):
        raise RouteError(f"{at}: must be an object, not {_kind(obj)}")
    unknown = sorted(json.dumps(str(k))[:66] for k in obj if k not in known)
    if unknown:
        raise RouteError(f"{at}: unknown field {unknown[0]} (the fields are {', '.join(known)})")


def _one_of(obj: dict, at: str, names: tuple[str, ...]) -> str:
    given = [n for n in names if n in obj]
    if len(given) != 1:
        raise RouteError(f"{at}: give exactly one of {', '.join(names)}, not "
                         + (" and ".join(given) or "none"))
    return given[0]


def _list(value: Any, at: str, most: int, if_empty: str | None) -> list:
    if not isinstance(value, list):
        raise RouteError(f"{at}: must be a list, not {_kind(value)}")
    if not value and if_empty:
        raise RouteError(f"{at}: must not be empty (an empty list would {if_empty})")
    if len(value) > most:
        raise RouteError(f"{at}: at most {most} entries, not {len(value)}")
    return value


def _text(value: Any, at: str, most: int, what: str) -> str:
    if not isinstance(value, str):
        raise RouteError(f"{at}: must be a string ({what}), not {_kind(value)}")
    if len(value) > most:
        raise RouteError(f"{at}: at most {most} characters, not {len(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RouteError(f"{at}: holds a lone surrogate, which is no text") from None
    return value


def _glob(value: Any, at: str) -> str:
    glob = _text(value, at, MAX_GLOB_CHARS, "a glob such as invoice.*")
    if not glob or _CONTROL.search(glob):
        raise RouteError(f"{at}: a glob is 1 or more characters, none of them control "
                         "characters (CR, LF, NUL...)")
    return glob


def _pointer(value: Any, at: str, whole: str | None = None) -> str:
    """A pointer; "" (the whole body) is refused when `whole` names what it would be."""
    pointer = _text(value, at, MAX_POINTER_CHARS, "a JSON Pointer such as /data/id")
    if not valid(pointer):
        raise RouteError(f"{at}: not a JSON Pointer (\"\" or names each after a /, with ~0 "
                         "for ~ and ~1 for /)")
    if pointer == "" and whole:
        raise RouteError(f"{at}: \"\" is the whole body, which is no {whole}: name a field "
                         "such as /data/id")
    return pointer


def _match(obj: Any, at: str) -> Match:
    _fields(obj, at, ("pointer", *_OPS))
    if "pointer" not in obj:
        raise RouteError(f"{at}.pointer: required")
    pointer = _pointer(obj["pointer"], f"{at}.pointer")
    op = _one_of(obj, at, _OPS)
    value = obj[op]
    if op == "exists" and not isinstance(value, bool):
        raise RouteError(f"{at}.exists: must be true or false, not {_kind(value)}")
    if op == "in":
        value = tuple(_value(v, f"{at}.in[{i}]") for i, v in enumerate(_list(
            value, f"{at}.in", MAX_IN_VALUES, "match nothing")))
    elif op == "equals":
        value = _value(value, f"{at}.equals")
    return Match(pointer, op, value)


def _value(value: Any, at: str) -> Any:
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        size = len(text.encode("utf-8"))
    except (TypeError, ValueError, RecursionError):
        raise RouteError(f"{at}: not a JSON value (finite numbers, text without lone "
                         "surrogates)") from None
    if size > MAX_VALUE_BYTES:
        raise RouteError(f"{at}: at most {MAX_VALUE_BYTES} bytes of JSON, not {size}")
    return value
