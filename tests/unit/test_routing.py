"""domain/routing.py and domain/route_specs.py: a destination's filter, rate and ordering
as an operator writes them (every refusal names its field), and the rules over an event's
type and body, with the values an attacker would send: huge integers, -0, 1e400 and NaN,
non-ASCII digits, escaped pointers, control characters in globs, a 1 MiB key, a body nested
100,000 deep."""
from __future__ import annotations

import hashlib
import json
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keystore_service.domain import routing
from keystore_service.domain.bulk import MAX_GLOB_CHARS, glob_matches, glob_parts
from keystore_service.domain.route_specs import (
    DESTINATION_NAME_PATTERN,
    MAX_DESTINATIONS,
    MAX_VALUE_BYTES,
    RouteError,
    parse_filter,
    parse_ordering,
    parse_rate,
)
from keystore_service.domain.routing import (
    Filter,
    Match,
    Ordering,
    OrderingMode,
    Rate,
    matches,
    newer,
    ordering_key,
    version_of,
)

DEEP = b"[" * 100_000 + b"]" * 100_000  # beyond what json reads: RecursionError inside
NOT_JSON = [b"", b"{", b"\xff\xfe{}", '{"a": 1}'.encode("utf-16"), b"\xef\xbb\xbf{}", DEEP]


def cond(pointer: str, op: str, value) -> Filter:
    return Filter(None, (Match(pointer, op, value),))


# -- what an operator writes ------------------------------------------------------------

def test_a_whole_filter_is_read_into_its_form():
    f = parse_filter({"event_types": ["invoice.*", "charge.?"], "match": [
        {"pointer": "/data/object/status", "equals": "paid"},
        {"pointer": "/a~1b/m~0n/50%", "in": [1, "x", None, {"k": [True]}]},
        {"pointer": "", "exists": True}]})
    assert f == Filter(("invoice.*", "charge.?"), (
        Match("/data/object/status", "equals", "paid"),
        Match("/a~1b/m~0n/50%", "in", (1, "x", None, {"k": [True]})), Match("", "exists", True)))
    assert parse_filter({}) == Filter(None, ()) == parse_filter({"match": []})


def test_the_limits_are_exactly_where_said():
    assert parse_filter({"event_types": ["*" * MAX_GLOB_CHARS] * 20}).event_types
    most = {"pointer": "/" + "p" * 255, "equals": "é" * ((MAX_VALUE_BYTES - 2) // 2)}
    assert parse_filter({"match": [most] * 10}).match[0].pointer == most["pointer"]
    assert len(parse_filter({"match": [{"pointer": "/x", "in": list(range(100))}]})
               .match[0].value) == 100
    assert MAX_DESTINATIONS == 10


MATCH = "filter.match[2]"
OK = {"pointer": "/ok", "exists": True}


def third(entry) -> dict:
    return {"match": [OK, OK, entry]}


@pytest.mark.parametrize("obj, message", [
    ([], "filter: must be an object, not a list"),
    ({"event_types": ["a"], "evnt_types": 1}, 'filter: unknown field "evnt_types"'),
    ({"event_types": "invoice.*"}, "filter.event_types: must be a list, not a string"),
    ({"event_types": None}, "filter.event_types: must be a list, not null"),
    ({"event_types": []}, "filter.event_types: must not be empty"),
    ({"event_types": ["a"] * 21}, "filter.event_types: at most 20 entries, not 21"),
    ({"event_types": ["a", 7]}, "filter.event_types[1]: must be a string"),
    ({"event_types": [""]}, "filter.event_types[0]: a glob is 1 or more characters"),
    ({"event_types": ["a" * 257]}, "filter.event_types[0]: at most 256 characters, not 257"),
    ({"event_types": ["a\r\nX-Evil: 1"]}, "none of them control characters"),
    ({"event_types": ["a\x00"]}, "none of them control characters"),
    ({"event_types": ["a\x85"]}, "none of them control characters"),
    ({"event_types": ["a\ud800"]}, "filter.event_types[0]: holds a lone surrogate"),
    ({"match": {"pointer": "/a"}}, "filter.match: must be a list, not an object"),
    ({"match": [{"pointer": "/a", "exists": True}] * 11}, "filter.match: at most 10 entries"),
    (third("x"), f"{MATCH}: must be an object, not a string"),
    (third({"pointer": "/a", "exists": True, "op": "eq"}),
     f'{MATCH}: unknown field "op"'),
    (third({"equals": 1}), f"{MATCH}.pointer: required"),
    (third({"pointer": "a", "equals": 1}), f"{MATCH}.pointer: not a JSON Pointer"),
    (third({"pointer": "/~2", "equals": 1}), f"{MATCH}.pointer: not a JSON"),
    (third({"pointer": 5, "equals": 1}), f"{MATCH}.pointer: must be a string"),
    (third({"pointer": "/" + "p" * 256, "equals": 1}),
     f"{MATCH}.pointer: at most 256 characters"),
    (third({"pointer": "/a"}), f"{MATCH}: give exactly one of equals, in, "
                                             "exists, not none"),
    (third({"pointer": "/a", "equals": 1, "exists": True}),
     f"{MATCH}: give exactly one of equals, in, exists, not equals and exists"),
    (third({"pointer": "/a", "exists": "true"}),
     f"{MATCH}.exists: must be true or false, not a string"),
    (third({"pointer": "/a", "exists": 1}), f"{MATCH}.exists: must be true or"),
    (third({"pointer": "/a", "in": "paid"}), f"{MATCH}.in: must be a list"),
    (third({"pointer": "/a", "in": []}), f"{MATCH}.in: must not be empty"),
    (third({"pointer": "/a", "in": list(range(101))}),
     f"{MATCH}.in: at most 100 entries, not 101"),
    (third({"pointer": "/a", "equals": "x" * 1023}),
     f"{MATCH}.equals: at most 1024 bytes of JSON, not 1025"),
    (third({"pointer": "/a", "in": [1, "é" * 512]}),
     f"{MATCH}.in[1]: at most 1024 bytes of JSON, not 1026"),
    (third({"pointer": "/a", "equals": float("nan")}),
     f"{MATCH}.equals: not a JSON value"),
    (third({"pointer": "/a", "equals": float("inf")}), "not a JSON value"),
    (third({"pointer": "/a", "equals": {1, 2}}), "not a JSON value"),
])
def test_a_filter_that_is_off_is_refused_naming_its_field(obj, message):
    with pytest.raises(RouteError, match=re.escape(message)):
        parse_filter(obj)


def test_a_caller_may_name_where_the_filter_is():
    with pytest.raises(RouteError, match=re.escape("destinations[3].filter.match[0].pointer")):
        parse_filter({"match": [{"pointer": "x", "exists": True}]}, at="destinations[3].filter")
    assert issubclass(RouteError, ValueError)


@pytest.mark.parametrize("obj, rate", [
    ({"per_second": 5}, Rate(5, 1)), ({"per_minute": 5}, Rate(5, 60)),
    ({"per_second": 1}, Rate(1, 1)), ({"per_minute": 1_000_000}, Rate(1_000_000, 60))])
def test_a_rate(obj, rate):
    assert parse_rate(obj) == rate


@pytest.mark.parametrize("obj, message", [
    ({"per_second": 5, "per_minute": 60}, "rate: give exactly one of per_second, per_minute, "
                                          "not per_second and per_minute"),
    ({}, "rate: give exactly one of per_second, per_minute, not none"),
    ({"per_second": True}, "rate.per_second: must be a whole number, not true or false"),
    ({"per_second": 5.0}, "rate.per_second: must be a whole number, not a number"),
    ({"per_minute": "5"}, "rate.per_minute: must be a whole number, not a string"),
    ({"per_second": None}, "rate.per_second: must be a whole number, not null"),
    ({"per_second": 0}, "rate.per_second: must be between 1 and 1_000_000, not 0"),
    ({"per_second": -1}, "not -1"), ({"per_minute": 1_000_001}, "not 1000001"),
    ({"per_second": 2**64}, "between 1 and"),
    ({"per_hour": 5}, 'rate: unknown field "per_hour"'), (5, "rate: must be an object"),
])
def test_a_rate_that_is_off_is_refused(obj, message):
    with pytest.raises(RouteError, match=re.escape(message)):
        parse_rate(obj)


def test_an_ordering():
    assert parse_ordering({"key": "/data/object/id", "mode": "serial"}) == \
        Ordering("/data/object/id", OrderingMode.SERIAL, None)
    got = parse_ordering({"key": "/id", "mode": "newer_wins", "version": "/created"})
    assert got == Ordering("/id", OrderingMode.NEWER_WINS, "/created")
    assert got.mode is OrderingMode.NEWER_WINS and [m.value for m in OrderingMode] == \
        ["serial", "newer_wins"]


@pytest.mark.parametrize("obj, message", [
    ({"key": "", "mode": "serial"}, 'ordering.key: "" is the whole body, which is no key'),
    ({"key": "id", "mode": "serial"}, "ordering.key: not a JSON Pointer"),
    ({"key": ["/id"], "mode": "serial"}, "ordering.key: must be a string"),
    ({"mode": "serial"}, "ordering.key: required"),
    ({"key": "/id"}, "ordering.mode: required"),
    ({"key": "/id", "mode": "Serial"}, "ordering.mode: must be one of serial, newer_wins"),
    ({"key": "/id", "mode": ["serial"]}, "ordering.mode: must be one of"),
    ({"key": "/id", "mode": "serial", "version": "/v"}, "ordering.version: only newer_wins"),
    ({"key": "/id", "mode": "serial", "version": None}, "ordering.version: only newer_wins"),
    ({"key": "/id", "mode": "newer_wins"}, "ordering.version: required for newer_wins"),
    ({"key": "/id", "mode": "newer_wins", "version": "created"}, "ordering.version: not a"),
    ({"key": "/id", "mode": "newer_wins", "version": ""}, "ordering.version: \"\" is the whole"),
    ({"key": "/id", "mode": "serial", "by": "/x"}, 'ordering: unknown field "by"'),
])
def test_an_ordering_that_is_off_is_refused(obj, message):
    with pytest.raises(RouteError, match=re.escape(message)):
        parse_ordering(obj)


def test_a_long_unknown_field_is_not_echoed_whole():
    with pytest.raises(RouteError) as err:
        parse_rate({"x" * 1_000_000: 1})
    assert len(str(err.value)) < 200


@pytest.mark.parametrize("name, ok", [
    ("default", True), ("a" * 64, True), ("eu-west_2", True), ("a" * 65, False), ("", False),
    ("Billing", False), ("a.b", False), ("a\n", False), ("é", False)])
def test_a_destination_name_is_a_source_name(name, ok):
    assert (re.fullmatch(DESTINATION_NAME_PATTERN, name) is not None) is ok


# -- which events a destination takes --------------------------------------------------------

def test_event_types():
    f = parse_filter({"event_types": ["invoice.*", "charge.?ucceeded"]})
    assert matches(f, "invoice.paid", b"not json") and matches(f, "charge.succeeded", b"")
    assert not matches(f, "invoicE.paid", b"{}") and not matches(f, "charge.failed", b"{}")
    assert not matches(f, None, b"{}")  # an event without a type matches no event_types
    assert matches(Filter(None, ()), None, DEEP)


@given(st.text("ab*?[.\n", max_size=8), st.text("ab*?[.\n", max_size=8))
def test_the_glob_means_what_its_parts_mean_as_a_regex(pattern, value):
    regex = "".join(".*" if p == "*" else "." if p == "?" else re.escape(p)
                    for p in glob_parts(pattern))  # the SQL's meaning, on inputs this small
    assert glob_matches(pattern, value) == (re.fullmatch(regex, value, re.DOTALL) is not None)


def test_a_glob_of_many_stars_takes_no_time():
    started = time.monotonic()
    assert not glob_matches("*a" * 127 + "*b", "a" * 10_000)
    assert time.monotonic() - started < 2  # a regex of these stars takes minutes at 10 of them


@pytest.mark.parametrize("doc, value, holds", [
    (b'{"v": true}', 1, False), (b'{"v": 1}', True, False), (b'{"v": 0}', False, False),
    (b'{"v": 1}', 1.0, True), (b'{"v": 1.0}', 1, True), (b'{"v": 1e0}', 1, True),
    (b'{"v": "1"}', 1, False), (b'{"v": 1}', "1", False), (b'{"v": null}', None, True),
    (b'{}', None, False), (b'{"v": ""}', None, False),
    (b'{"v": -0}', 0, True), (b'{"v": -0.0}', 0, True), (b'{"v": 0}', -0.0, True),
    (b'{"v": 9223372036854775808}', 2**63, True), (b'{"v": 9223372036854775809}', 2**63, False),
    (b'{"v": 18446744073709551616}', 2**64, True),
    (b'{"v": 18446744073709551617}', 2**64, False),  # a double would call them equal
    (b'{"v": 9007199254740993}', 9007199254740992, False),
    (b'{"v": 1e400}', 1e308, False), (b'{"v": NaN}', 0, False), (b'{"v": Infinity}', 1, False),
    (b'{"v": {"a": 1, "b": [1, 2]}}', {"b": [1, 2.0], "a": 1}, True),
    (b'{"v": {"a": 1, "b": [1, 2]}}', {"a": 1, "b": [2, 1]}, False),
    (b'{"v": {"a": 1}}', {"a": 1, "b": None}, False), (b'{"v": [true]}', [1], False),
    (b'{"v": "\\u00e9"}', "\u00e9", True), (b'{"v": "\xc3\xa9"}', "é", True),
    (b'{"v": "\\ud800"}', "\ud800", True),
])
def test_equals_is_jsons_equality(doc, value, holds):
    assert matches(cond("/v", "equals", value), None, doc) is holds
    assert matches(cond("/v", "in", ("other", value)), None, doc) is holds


def test_nan_equals_nothing_even_nan():
    assert not matches(cond("/v", "equals", float("nan")), None, b'{"v": NaN}')
    assert not matches(cond("/v", "in", (float("inf"),)), None, b'{"v": Infinity}')


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text()
                    | st.floats(allow_nan=False, allow_infinity=False),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)


@given(JSON)
def test_every_value_equals_itself_and_keys_alike(value):
    doc = json.dumps({"v": value}).encode()
    assert matches(cond("/v", "equals", value), None, doc)
    assert ordering_key(doc, "/v") == (None if value is None else ordering_key(
        json.dumps({"v": value}, indent=1, sort_keys=True).encode(), "/v"))


def test_exists():
    doc = b'{"a": null, "b": {"c": []}, "a/b": {"m~n": 1}, "50%": 2}'
    for pointer, there in [("/a", True), ("/b/c", True), ("/b/c/0", False), ("/x", False),
                           ("/a~1b/m~0n", True), ("/50%", True), ("/a%2Fb", False), ("", True)]:
        assert matches(cond(pointer, "exists", True), None, doc) is there
        assert matches(cond(pointer, "exists", False), None, doc) is not there
    assert matches(cond("/a~1b/m~0n", "equals", 1), None, doc)


@pytest.mark.parametrize("doc", NOT_JSON, ids=range(len(NOT_JSON)))
def test_in_a_body_that_is_no_json_nothing_exists(doc):
    assert not matches(cond("", "exists", True), None, doc)
    assert matches(cond("", "exists", False), None, doc)
    assert not matches(cond("/a", "equals", 1), None, doc)
    assert ordering_key(doc, "/a") is None and version_of(doc, "/a") is None


def test_every_condition_must_hold_and_the_body_is_read_once(monkeypatch):
    f = parse_filter({"event_types": ["a"], "match": [
        {"pointer": "/s", "in": ["paid", "open"]}, {"pointer": "/n", "exists": True}]})
    reads = []
    read = routing.read_json
    monkeypatch.setattr(routing, "read_json", lambda raw: reads.append(raw) or read(raw))
    assert matches(f, "a", b'{"s": "open", "n": 0}') and len(reads) == 1
    assert not matches(f, "a", b'{"s": "open"}') and not matches(f, "a", b'{"s": "x", "n": 0}')
    assert not matches(f, "b", b'{"s": "open", "n": 0}') and len(reads) == 3


# -- ordering keys ----------------------------------------------------------------------

def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_an_ordering_key_is_the_hash_of_the_values_canonical_text():
    assert ordering_key(b'{"id": "in_1"}', "/id") == sha('"in_1"')
    assert ordering_key(b'{"id": "\\u00e9"}', "/id") == sha('"é"')  # strings keep their text
    assert ordering_key(b'{"id": {"b": 1, "a": [1.0]}}', "/id") == sha('{"a":[1],"b":1}')
    assert ordering_key(b'{"id": 1}', "/id") == ordering_key(b'{"id": 1.0}', "/id") == sha("1")
    assert ordering_key(b'{"id": -0}', "/id") == ordering_key(b'{"id": 0}', "/id")
    assert ordering_key(b'{"id": "1"}', "/id") != sha("1")
    assert ordering_key(b'{"id": false}', "/id") != ordering_key(b'{"id": 0}', "/id")
    assert ordering_key(b'{"id": 18446744073709551617}', "/id") != \
        ordering_key(b'{"id": 18446744073709551616}', "/id")
    assert ordering_key(b'{"a~/b": 1}', "/a~0~1b") == sha("1")


def test_a_huge_key_is_a_fixed_length_key():
    doc = json.dumps({"id": "k" * (1 << 20)}).encode()
    assert len(ordering_key(doc, "/id")) == len("sha256:") + 64 == len(sha("1"))


@pytest.mark.parametrize("doc", [b'{"id": null}', b'{}', b'{"id": NaN}', b'{"id": [1e400]}',
                                 b'{"id": {"x": -Infinity}}', b'[1]'])
def test_no_ordering_key(doc):
    assert ordering_key(doc, "/id") is None


# -- versions ---------------------------------------------------------------------------

@pytest.mark.parametrize("doc, version", [
    (b'{"v": 7}', 7), (b'{"v": 18446744073709551617}', 2**64 + 1), (b'{"v": 1.5}', 1.5),
    (b'{"v": 2.0}', 2), (b'{"v": "2026-01-01T00:00:00Z"}', "2026-01-01T00:00:00Z"),
    (b'{"v": "r12"}', "r12"), (b'{"v": ""}', ""), (b'{}', None), (b'{"v": null}', None),
    (b'{"v": true}', None), (b'{"v": {"n": 1}}', None), (b'{"v": [1]}', None),
    (b'{"v": 1e400}', None), (b'{"v": -1e400}', None), (b'{"v": NaN}', None),
    (b'{"v": Infinity}', None)])
def test_version_of(doc, version):
    got = version_of(doc, "/v")
    assert got == version and type(got) is type(version)


T = "2026-11-30T10:00:00"


@pytest.mark.parametrize("candidate, last, answer", [
    (2, 1, True), (1, 2, False), (1, 1, False), (1.0, 1, False), (1.5, 1, True), (-0.0, 0, False),
    (2**63 + 1, 2**63, True), (2**64 + 1, float(2**64), True), (2**64, float(2**64), False),
    (9007199254740993, 9007199254740992.0, True),  # exact, not as doubles
    (T + "Z", T + "+00:00", False), (T + "+00:00", T + "z", False),  # the same instant
    (T + "+01:00", "2026-11-30T09:30:00Z", False), ("2026-11-30T09:30:00Z", T + "+01:00", True),
    (T + "-04:30", "2026-11-30T14:29:59Z", True), ("2026-11-30t10:00:00Z", T + "Z", False),
    (T + ".0000001Z", T + "Z", True), (T + ".5Z", T + ".50Z", False),
    (T + ".50Z", T + ".5Z", False), (T + ".000Z", T + "Z", False),
    (T + ".45Z", T + ".5Z", False), (T + ".5Z", T + ".45Z", True),
    ("2026-11-30 10:00:01Z", T + "Z", True),
    ("0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59", False),
    ("b", "a", True), ("B", "a", False), ("é", "z", True), ("a", "a", False),
    (T, "2026-11-30T09:00:00", True),  # without a zone: text, compared as text
    (T, T + "Z", None), (T + "Z", "r1", None), ("2026-02-30T00:00:00Z", T + "Z", None),
    ("２０２６-11-30T10:00:00Z", T + "Z", None), ("٢٠٢٦-11-30T10:00:00Z", T + "Z", None),
    (T + "+24:00", T + "Z", None), ("2026-11-30T23:59:60Z", T + "Z", None),
    (1, "1", None), ("2", 1, None), (True, 0, None), (1, False, None), (None, 1, None),
    (2, None, None), ({"v": 2}, {"v": 1}, None), ([2], [1], None),
    (float("inf"), 1, None), (float("nan"), 1, None), (1, float("nan"), None),
])
def test_newer(candidate, last, answer):
    assert newer(candidate, last) is answer


def test_versions_from_bodies_compare():
    old, new = b'{"v": 18446744073709551616}', b'{"v": 18446744073709551617}'
    assert newer(version_of(new, "/v"), version_of(old, "/v")) is True
    assert newer(version_of(old, "/v"), version_of(old, "/v")) is False
    assert newer(version_of(b'{"v": NaN}', "/v"), version_of(old, "/v")) is None
