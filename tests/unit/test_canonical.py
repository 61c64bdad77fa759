"""Fingerprints: RFC 8785 canonical form, SHA-256, and the strict body parser."""
from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keystore_service.domain.canonical import canonical, fingerprint, parse_json_object


def fp_of(text: str) -> str:
    return fingerprint(parse_json_object(('{"p":' + text + "}").encode())["p"])


@pytest.mark.parametrize("a,b", [
    ('{"b":1,"a":2}', '{ "a" : 2 , "b" : 1 }'),
    ("1", "1.0"),
    ("1e2", "100"),
    ('"\\u00e9"', '"é"'),
    ('"\\ud83d\\ude00"', '"😀"'),
    ("9007199254740993", "9007199254740992"),  # beyond 2^53: compared as doubles
    ("[1,{\"x\":[]}]", "[1.0, {\"x\": []}]"),
])
def test_equivalent_payloads_have_one_fingerprint(a, b):
    assert fp_of(a) == fp_of(b)


@pytest.mark.parametrize("a,b", [("1", '"1"'), ("[1,2]", "[2,1]"), ("null", "{}"),
                                 ('{"a":1}', '{"a":1,"b":null}'), ("true", "1")])
def test_different_payloads_differ(a, b):
    assert fp_of(a) != fp_of(b)


def test_the_fingerprint_is_sha256_of_the_rfc8785_bytes():
    value = {"b": [1.5, "é"], "a": 1e21}
    expected = hashlib.sha256(b'{"a":1e+21,"b":[1.5,"\xc3\xa9"]}').hexdigest()
    assert canonical(value) == b'{"a":1e+21,"b":[1.5,"\xc3\xa9"]}'
    assert fingerprint(value) == "sha256:" + expected


@pytest.mark.parametrize("body", [
    b'{"p": NaN}', b'{"p": Infinity}', b'{"p": -Infinity}', b'{"a":1,"a":2}',
    b'{"p": {"x":1, "x":1}}', b'{"p": "\\ud800"}', b'{"p": "\\udc00x"}', b'[1]', b'"x"',
    b'{"p": 1', b'\xff\xfe', b"", b"[" * 100_000 + b"]" * 100_000,
])
def test_malformed_bodies_are_refused(body):
    with pytest.raises(ValueError):
        parse_json_object(body)


def test_numbers_beyond_a_double_are_refused():
    with pytest.raises(ValueError):
        canonical(10 ** 400)


def test_a_valid_surrogate_pair_is_accepted():
    assert parse_json_object(b'{"p": "\\ud83d\\ude00"}') == {"p": "😀"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@given(json_values)
def test_canonical_form_is_stable_under_reparsing(value):
    once = canonical(value)
    assert canonical(parse_json_object(b'{"p":' + once + b"}")["p"]) == once


# --- property: equivalent payloads share one fingerprint; different ones never collide ------

def _spell(value, draw) -> str:
    """One of the many JSON texts of `value`: shuffled members, random whitespace, integers
    written as 1.0 or 1e0, strings with \\u escapes."""
    ws = lambda: draw(st.sampled_from(["", " ", "\n", "\t ", "  "]))
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return draw(st.sampled_from([str(value), f"{value}.0", f"{value}e0", f"{value}.000"]))
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return draw(st.sampled_from([json.dumps(value), json.dumps(value, ensure_ascii=False)]))
    if isinstance(value, list):
        return "[" + ",".join(ws() + _spell(v, draw) + ws() for v in value) + "]"
    members = list(value.items())
    order = draw(st.permutations(range(len(members)))) if members else []
    return "{" + ",".join(ws() + json.dumps(members[i][0]) + ws() + ":" + ws()
                          + _spell(members[i][1], draw) for i in order) + "}"


values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=64).filter(lambda f: f == f)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=4),
    max_leaves=15)


@given(values, st.data())
def test_every_spelling_of_a_payload_has_one_fingerprint(value, data):
    texts = [_spell(value, data.draw) for _ in range(3)]
    prints = {fingerprint(parse_json_object(('{"p":' + t + "}").encode())["p"]) for t in texts}
    assert prints == {fingerprint(value)}


@given(values, values)
def test_different_payloads_never_share_a_fingerprint(a, b):
    if canonical(a) != canonical(b):  # different as JSON numbers and strings say
        assert fingerprint(a) != fingerprint(b)
    else:
        assert fingerprint(a) == fingerprint(b)
