"""Generic sources: every signature config (none, sha256/sha1 x hex/base64, with and without
prefix), both event-id rules, the config validation, and the event id from JSON pointers
joined exactly like the Python client's derive_key."""
from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from keystore_client import derive_key as client_derive_key

from keystore_service.gateway.providers import InvalidSignature, MissingEventId
from keystore_service.gateway.providers._keys import derive_key
from keystore_service.gateway.providers.generic import PROVIDER, validate_config

from .support import MALFORMED, inbound

SECRET = "a shared secret"
BODY = b'{"project": "acme", "week": 48, "meta": {"a/b": "x", "m~n": "y"}, "list": [1, "two"]}'
BY_HEADER = {"header": "X-Event-Id"}


def sig(**fields) -> dict:
    """A config whose signature is `fields` (on top of a valid sha256/hex one)."""
    return {"signature": {"header": "X", "algorithm": "sha256", "encoding": "hex", **fields},
            "event_id": BY_HEADER}
SIGNATURES = [None] + [
    {"header": "X-Signature", "algorithm": algorithm, "encoding": encoding, "prefix": prefix}
    for algorithm, encoding, prefix in itertools.product(("sha256", "sha1"), ("hex", "base64"),
                                                         ("", "sha256="))
]


def signed(signature: dict, body: bytes = BODY, secret: str = SECRET) -> dict:
    digest = hmac.new(secret.encode(), body, signature["algorithm"]).digest()
    text = digest.hex() if signature["encoding"] == "hex" else base64.b64encode(digest).decode()
    return {signature["header"]: signature["prefix"] + text}


def ours(config: dict, sent: dict, body: bytes = BODY, secrets=(SECRET,)) -> bool:
    try:
        PROVIDER.verify(inbound(sent, body), list(secrets), config)
        return True
    except InvalidSignature:
        return False


@pytest.mark.parametrize("signature", SIGNATURES[1:], ids=lambda s: "-".join(s.values()))
def test_each_signature_config_valid_tampered_wrong_secret_rotation(signature):
    config = {"signature": signature, "event_id": BY_HEADER}
    validate_config(config)
    assert PROVIDER.needs_secret(config)
    assert ours(config, signed(signature))
    assert not ours(config, signed(signature), BODY + b" ")
    assert not ours(config, signed(signature, secret="other"))
    assert ours(config, signed(signature, secret="next"), secrets=(SECRET, "next"))
    assert not ours(config, {})
    assert not ours(config, signed(signature), secrets=())


@pytest.mark.parametrize("signature", [s for s in SIGNATURES[1:] if s["encoding"] == "hex"])
def test_hex_in_either_case(signature):
    [(name, value)] = signed(signature).items()
    upper = signature["prefix"] + value[len(signature["prefix"]):].upper()
    assert ours({"signature": signature, "event_id": BY_HEADER}, {name: upper})


@pytest.mark.parametrize("signature", [s for s in SIGNATURES[1:] if s["encoding"] == "base64"])
def test_base64_padded_or_not_but_in_the_standard_alphabet(signature):
    config = {"signature": signature, "event_id": BY_HEADER}
    [(name, value)] = signed(signature).items()
    assert ours(config, {name: value.rstrip("=")})
    urlsafe = value.replace("+", "-").replace("/", "_")
    assert ours(config, {name: urlsafe}) == (urlsafe == value)


@pytest.mark.parametrize("signature", SIGNATURES[1:], ids=lambda s: "-".join(s.values()))
@pytest.mark.parametrize("value", MALFORMED)
def test_a_malformed_signature_header_is_invalid_signature(signature, value):
    assert not ours({"signature": signature, "event_id": BY_HEADER},
                    {signature["header"]: value})


def test_the_prefix_is_exact():
    signature = SIGNATURES[-1]  # prefix "sha256="
    [(name, value)] = signed(signature).items()
    config = {"signature": signature, "event_id": BY_HEADER}
    for wrong in ("SHA256=" + value[7:], value[7:], " " + value, "sha256:" + value[7:]):
        assert not ours(config, {name: wrong})


def test_without_signature_anything_passes_and_no_secret_is_needed():
    config = {"signature": None, "event_id": BY_HEADER}
    validate_config(config)
    assert not PROVIDER.needs_secret(config)
    assert ours(config, {}, b"\xff anything", secrets=())


@pytest.mark.parametrize("config", [{}, {"event_id": BY_HEADER}, None, "x",
                                    {"signature": {"header": "X"}, "event_id": BY_HEADER}])
def test_an_invalid_config_fails_closed_on_the_public_path(config):
    assert PROVIDER.needs_secret(config)
    assert not ours(config, {}, secrets=())
    with pytest.raises(MissingEventId):
        PROVIDER.event_id(inbound({"X-Event-Id": "e"}, BODY), config)


def test_event_id_from_a_header():
    config = {"signature": None, "event_id": BY_HEADER}
    assert PROVIDER.event_id(inbound({"x-event-id": "evt 42"}), config) == "evt 42"
    for value in (None, "", "x" * 513, "a\nb", "\x00", "\ud800"):
        with pytest.raises(MissingEventId):
            PROVIDER.event_id(inbound({"X-Event-Id": value} if value is not None else {}),
                              config)


def json_config(*pointers: str) -> dict:
    return {"signature": None, "event_id": {"json": list(pointers)}}


@pytest.mark.parametrize("pointers, key", [
    (["/project", "/week"], "acme|48"),
    (["/meta/a~1b", "/meta/m~0n"], "x|y"),
    (["/list/0", "/list/1"], "1|two"),
    (["/project"], "acme"),
])
def test_event_id_from_json_pointers(pointers, key):
    assert PROVIDER.event_id(inbound({}, BODY), json_config(*pointers)) == key


@pytest.mark.parametrize("body, pointer", [
    (BODY, "/missing"), (BODY, "/list/2"), (BODY, "/list/-"), (BODY, "/list/01"),
    (BODY, "/project/x"), (BODY, "/meta"), (BODY, "/list"), (b'{"a": null}', "/a"),
    (b'{"a": true}', "/a"), (b'{"a": 1.5}', "/a"), (b'{"a": 1e2}', "/a"), (b'{"a": "  "}', "/a"),
    (b'{"a": NaN}', "/a"), (b"not json", "/a"), (b"", "/a"), (b"\xff", "/a"),
    (b"[" * 100_000, "/a"), (b'{"a": ' + b"9" * 5000 + b"}", "/a"),
])
def test_no_usable_value_is_missing_event_id(body, pointer):
    with pytest.raises(MissingEventId):
        PROVIDER.event_id(inbound({}, body), json_config(pointer))


def test_an_empty_pointer_is_the_whole_document():
    assert PROVIDER.event_id(inbound({}, b'"order 7"'), json_config("")) == "order 7"


json_values = st.one_of(st.text(max_size=300), st.integers(-(10**40), 10**40))


@settings(max_examples=400, derandomize=True)
@given(values=st.lists(json_values, min_size=1, max_size=8))
def test_the_key_is_the_python_clients_derive_key(values):
    body = json.dumps({f"k{i}": v for i, v in enumerate(values)}).encode()
    pointers = [f"/k{i}" for i in range(len(values))]
    try:
        expected = client_derive_key(*values)
    except (ValueError, TypeError):  # an empty part after stripping: refused by both
        with pytest.raises(MissingEventId):
            PROVIDER.event_id(inbound({}, body), json_config(*pointers))
        return
    assert PROVIDER.event_id(inbound({}, body), json_config(*pointers)) == expected
    assert derive_key(values, pointers) == expected


@pytest.mark.parametrize("values", [
    ["é", "e\u0301"], ["a|b", "c"], ["50%", "x"], ["\x00\x1f\x7f\x85", "x"], ["\ud800", "y"],
    ["  padded  "], ["x" * 600], ["a" * 256, "b" * 256], [2**70, -3], ["urn:x:1", "14:05"],
])
def test_the_edges_of_the_key_rule_agree_with_the_client(values):
    assert derive_key(values, ["/a"] * len(values)) == client_derive_key(*values)


@pytest.mark.parametrize("config", [
    {"signature": None, "event_id": {"json": ["/a"]}},
    {"signature": None, "event_id": {"json": ["/a", "/b/0", "/c~1d", "", "/é"]}},
    {"signature": {"header": "X-Hub-Signature", "algorithm": "sha1", "encoding": "hex"},
     "event_id": {"header": "X-Request-Id"}},
    {"signature": {"header": "Signature", "algorithm": "sha256", "encoding": "base64",
                   "prefix": "v1 sig="}, "event_id": {"json": ["/" + "x" * 255]}},
])
def test_valid_configs(config):
    validate_config(config)


@pytest.mark.parametrize("config", [
    None, [], {}, {"event_id": BY_HEADER}, {"signature": None},
    {"signature": None, "event_id": BY_HEADER, "extra": 1},
    {"signature": "sha256", "event_id": BY_HEADER},
    sig(algorithm="md5"), sig(encoding="b64"), sig(header=None), sig(header="X Y"),
    sig(header="X:"), sig(header="Ä"), sig(header="X" * 129), sig(prefix="a\r\n"),
    sig(prefix="sig "), sig(prefix=5), sig(salt="x"),
    {"signature": {"algorithm": "sha256", "encoding": "hex"}, "event_id": BY_HEADER},
    {"signature": None, "event_id": {}},
    {"signature": None, "event_id": {"header": "X", "json": ["/a"]}},
    {"signature": None, "event_id": {"header": ""}},
    {"signature": None, "event_id": {"header": "X\n"}},
    {"signature": None, "event_id": {"query": "id"}},
    {"signature": None, "event_id": {"json": []}},
    {"signature": None, "event_id": {"json": "/a"}},
    {"signature": None, "event_id": {"json": ["/a"] * 2}},
    {"signature": None, "event_id": {"json": [f"/{i}" for i in range(9)]}},
    {"signature": None, "event_id": {"json": ["a"]}},
    {"signature": None, "event_id": {"json": ["/a~2"]}},
    {"signature": None, "event_id": {"json": ["/a~"]}},
    {"signature": None, "event_id": {"json": ["/" + "x" * 256]}},
    {"signature": None, "event_id": {"json": ["/a\x00"]}},
    {"signature": None, "event_id": {"json": [7]}},
])
def test_invalid_configs_say_why(config):
    with pytest.raises(ValueError) as error:
        validate_config(config)
    assert str(error.value)


def test_sha1_and_sha256_are_the_algorithms_hashlib_names():
    assert all(s["algorithm"] in hashlib.algorithms_guaranteed for s in SIGNATURES[1:])
