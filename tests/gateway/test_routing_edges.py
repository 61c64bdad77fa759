"""An attacker's pass on routing's inputs (issue 29: "filters and pointers at the edges of
their types, ordering keys that are huge, missing or of odd types"), both backends, through
the HTTP API and the relay: what cannot be used is a 400 naming its field when the
destination is configured, and every body an attacker sends gets a defined answer at ingest
(202) and a defined outcome at its turn (delivered, filtered or superseded), never a 500.
The pure rules are in tests/unit/test_routing.py and test_pointers.py; this file is what
reaches the tables and the wire."""
from __future__ import annotations

import json

import pytest

from .ordering_support import turn
from .support import SECRET, Sink, deliver

LONG_POINTER = "/" + "p" * 9_999  # 10,000 characters: far past the 256 a pointer may have
BIG = 2 ** 63  # past a signed 64-bit integer: stored and compared exactly
# Past Python's limit on the digits of an int read from text (sys.int_info's default 4,300):
# json refuses the whole body, so for routing it is no JSON.
DIGITS = "1" * 4_400


@pytest.fixture
def sink():
    s = Sink()
    yield s
    s.close()


def make(gw, sink, destinations: list[dict]) -> dict:
    """The source `shop` with these destinations (each a name and its routing), all on
    `sink`."""
    status, body, _ = gw.post("/v1/sources", {
        "name": "shop", "provider": "testing", "secrets": [SECRET],
        "destinations": [{"url": sink.url, **d} for d in destinations]})
    assert status == 201, body
    return body["source"]


def send(gw, source: dict, event_id: str, raw: str) -> None:
    """An event whose body is `raw` JSON text with the event's id and type spliced in."""
    body = ('{"id": "%s", "type": "t.x", ' % event_id + raw.lstrip("{")).encode()
    status, answer, _ = deliver(gw, source, body, event_id=event_id)
    assert status == 202, answer


def outcome(gw) -> dict[tuple[str, str], str]:
    """Each delivery's state by (event id, destination)."""
    status, body, _ = gw.get("/v1/deliveries", limit=200)
    assert status == 200, body
    return {(d["event_id"], d["destination"]): d["state"] for d in body["deliveries"]}


def taken(gw, destination: str) -> list[str]:
    return sorted(e for (e, d), s in outcome(gw).items() if d == destination and s ==
                  "delivered")


# -- configuration: a clear 400 ----------------------------------------------------------------

def _filtered(match: dict) -> dict:
    return {"filter": {"match": [match]}}


@pytest.mark.parametrize("routing, field, said", [
    (_filtered({"pointer": "/v", "in": list(range(1_000))}), "filter",
     "in: at most 100 entries, not 1000"),
    (_filtered({"pointer": "/v", "in": []}), "filter", "in: must not be empty"),
    (_filtered({"pointer": LONG_POINTER, "exists": True}), "filter",
     "pointer: at most 256 characters, not 10000"),
    (_filtered({"pointer": "/v", "equals": 10 ** 1100}), "filter",
     "equals: at most 1024 bytes of JSON"),
    ({"ordering": {"key": LONG_POINTER, "mode": "serial"}}, "ordering",
     "key: at most 256 characters, not 10000"),
    ({"ordering": {"key": "/k", "mode": "newer_wins", "version": LONG_POINTER}}, "ordering",
     "version: at most 256 characters, not 10000"),
    ({"ordering": {"key": {"pointer": "/k"}, "mode": "serial"}}, "ordering",
     "key: must be a string"),
    ({"ordering": {"key": ["/k"], "mode": "serial"}}, "ordering", "key: must be a string"),
    ({"ordering": {"key": "/k", "mode": "newer_wins", "version": 1}}, "ordering",
     "version: must be a string"),
    ({"ordering": {"key": "/k", "mode": "newer_wins", "version": None}}, "ordering",
     "version: must be a string"),
])
def test_a_routing_at_the_edge_of_its_type_is_a_400_naming_its_field(gw, sink, routing, field,
                                                                    said):
    status, body, _ = gw.post("/v1/sources", {
        "name": "shop", "provider": "testing", "secrets": [SECRET], "destinations": [
            {"name": "a", "url": sink.url}, {"name": "b", "url": sink.url, **routing}]})
    assert status == 400, body
    error = body["error"]
    assert error["code"] == "invalid_request" and said in error["message"], error
    assert error["details"] == {"field": f"destinations.1.{field}"}, error
    assert len(json.dumps(body)) < 1_000  # the 10,000 characters are not echoed back
    assert gw.get("/v1/sources/shop")[0] == 404


@pytest.mark.parametrize("value", ["1e400", "-1e400", DIGITS, "NaN"])
def test_a_number_json_cannot_hold_is_a_400_not_a_500(gw, sink, value):
    raw = ('{"name": "shop", "provider": "testing", "secrets": ["%s"], "destination": '
           '{"url": "%s", "filter": {"match": [{"pointer": "/n", "equals": %s}]}}}'
           % (SECRET, sink.url, value))
    status, body, _ = gw.post("/v1/sources", raw=raw.encode(),
                              headers={"Content-Type": "application/json"})
    assert status == 400 and body["error"]["code"] == "invalid_request", body
    assert gw.get("/v1/sources/shop")[0] == 404


# -- at ingest and at the event's turn: a defined outcome ------------------------------------

def test_equals_and_in_compare_json_values_never_their_spelling(gw, sink, forwarding):
    make(gw, sink, [
        {"name": "number", "filter": {"match": [{"pointer": "/v", "equals": 1}]}},
        {"name": "text", "filter": {"match": [{"pointer": "/v", "equals": "1"}]}},
        {"name": "boolean", "filter": {"match": [{"pointer": "/v", "equals": True}]}},
        {"name": "many", "filter": {"match": [
            {"pointer": "/v", "in": [f"v{n}" for n in range(99)] + [1.0]}]}}])
    source = gw.get("/v1/sources/shop")[1]["source"]
    given = {"int": "1", "float": "1.0", "exp": "1e0", "double": "1.0000000000000001",
             "text": '"1"', "true": "true", "null": "null", "text_float": '"1.0"',
             "huge": DIGITS}
    for name, value in given.items():
        send(gw, source, name, '{"v": %s}' % value)
    send(gw, source, "missing", "{}")
    while turn(forwarding):
        pass
    # 1.0000000000000001 is written with a fraction: a double, which is 1 (README, filters);
    # a body with an integer of 4,400 digits is no JSON to routing: nothing in it exists
    assert taken(gw, "number") == taken(gw, "many") == ["double", "exp", "float", "int"]
    assert taken(gw, "text") == ["text"] and taken(gw, "boolean") == ["true"]
    assert len(outcome(gw)) == 4 * 10 and set(outcome(gw).values()) == {"delivered",
                                                                         "filtered"}


def test_pointers_escape_index_and_compare_names_code_point_by_code_point(gw, sink,
                                                                         forwarding):
    make(gw, sink, [
        {"name": "escaped", "filter": {"match": [{"pointer": "/a~1b/m~0n", "equals": 1}]}},
        {"name": "first", "filter": {"match": [{"pointer": "/items/0", "equals": "x"}]}},
        {"name": "past-end", "filter": {"match": [{"pointer": "/items/-", "exists": True}]}},
        {"name": "accented", "filter": {"match": [{"pointer": "/donn\u00e9es/\u00e9",
                                                   "equals": 1}]}}])
    source = gw.get("/v1/sources/shop")[1]["source"]
    bodies = {
        "p1": {"a/b": {"m~n": 1}, "items": ["x"], "donn\u00e9es": {"\u00e9": 1}},
        # "~1" is "/" only when unescaped: neither a path a/b nor the name "a~1b" is it;
        # an object's members "0" and "-" are found by name
        "p2": {"a": {"b": {"m~n": 1}}, "a~1b": {"m~0n": 1}, "items": {"0": "x", "-": 0}},
        # index 0 is "y"; "e" + a combining accent is not "é" (no Unicode normalisation)
        "p3": {"items": ["y", "x"], "donne\u0301es": {"e\u0301": 1}},
        "p4": {"items": []},
    }
    for event_id, fields in bodies.items():
        send(gw, source, event_id, json.dumps(fields))
    while turn(forwarding):
        pass
    assert taken(gw, "escaped") == ["p1"] and taken(gw, "accented") == ["p1"]
    assert taken(gw, "first") == ["p1", "p2"]
    assert taken(gw, "past-end") == ["p2"]  # "-" names no array element, ever


NEWER = {"ordering": {"key": "/k", "mode": "newer_wins", "version": "/v"}}


def test_ordering_keys_of_every_type_and_size(gw, sink, forwarding):
    source = make(gw, sink, [{"name": "crm", **NEWER}])
    huge = "x" * 500_000  # a key half the body limit: kept as its 71-character digest

    def step(*events: tuple[str, str]) -> list:
        for event_id, raw in events:
            send(gw, source, event_id, raw)
        return turn(forwarding)
    assert step(("k1", '{"k": 1, "v": 5}'), ("k5", '{"k": [1, {"b": 2, "a": 1}], "v": 4}'),
                ("k9", '{"k": "%s", "v": 2}' % huge),
                ("k11", '{"k": "\\ud800", "v": 1}')) == ["delivered"] * 4
    assert step(("k2", '{"k": 1.0, "v": 4}'),  # the key 1 again: superseded
                ("k3", '{"k": "1", "v": 4}'), ("k4", '{"k": true, "v": 4}'),  # other keys
                ("k6", '{"k": [1.0, {"a": 1, "b": 2}], "v": 3}'),  # k5's key
                ("k7", '{"k": null, "v": 1}'), ("k8", '{"v": 1}'),  # no key: not compared
                ("k10", '{"k": "%s", "v": 1}' % huge),
                ("k12", '{"k": "\\ud800", "v": 0}')) == sorted(  # a lone surrogate: a key
        ["superseded", "delivered", "delivered", "superseded", "delivered", "delivered",
         "superseded", "superseded"])
    states = outcome(gw)
    assert sorted(e for (e, _), s in states.items() if s == "superseded") == [
        "k10", "k12", "k2", "k6"]


def test_newer_wins_versions_of_every_type(gw, sink, forwarding):
    source = make(gw, sink, [{"name": "crm", **NEWER}])

    def one(event_id: str, version: str, key: str = "a") -> str:
        send(gw, source, event_id, '{"k": "%s", "v": %s}' % (key, version))
        (ended,) = turn(forwarding)
        return ended
    assert one("v1", str(BIG)) == "delivered"
    assert one("v2", f"{BIG}.5") == "superseded"  # written with a fraction: a double, 2**63
    assert one("v3", str(BIG + 1)) == "delivered"  # exact: newer than 2**63
    assert one("v4", "9.3e18") == "delivered"
    for event_id, odd in (("v5", '"99999999999999999999"'), ("v6", "true"), ("v7", "null"),
                          ("v8", "[1]"), ("v9", DIGITS)):
        assert one(event_id, odd) == "delivered"  # not comparable: forwarded, never dropped
    assert one("v10", "9.25e18") == "superseded"  # 9.3e18 is still the key's last
    assert one("t1", '"9"', "b") == "delivered"
    assert one("t2", '"10"', "b") == "superseded"  # strings by code point: "10" < "9"
    assert one("t3", '"2026-12-07T10:00:00Z"', "b") == "delivered"  # a time, not "9"'s kind
    for event_id, text in (("n1", '"a\\u0000"'), ("n2", '"\\u2028\\u00e9"')):
        assert one(event_id, text, event_id) == "delivered"  # stored as it is
        assert one(event_id + "-again", text, event_id) == "superseded"
    # A lone surrogate is valid JSON but no text: it is not compared (forwarded each time),
    # and nothing tries to store it (which failed the settle after the forward, so the
    # relay sent the event again at every lease's end).
    assert one("s1", '"\\ud800"', "s") == "delivered"
    assert one("s2", '"\\ud800"', "s") == "delivered"
    assert [r["body"].count(b"\\ud800") for r in sink.requests[-2:]] == [1, 1]
