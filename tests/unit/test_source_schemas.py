"""/openapi.json describes what POST /v1/sources and PATCH /v1/sources/{name} check (issue 25,
item 12): each provider's secret pattern agrees with its check_secret, the header-name rule
with the reserved names, and the per-provider schemas with the service's refusals."""
from __future__ import annotations

import base64
import re

import jsonschema
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from keystore_service.gateway import providers
from keystore_service.web.api import gateway_schemas
from keystore_service.web.api.openapi import document

SPEC = document()
MAX_SECRET = 512  # the API's bound on a secret (gateway_schemas.Secret)


def valid(body: dict, model: str) -> bool:
    schema = {"$ref": f"#/components/schemas/{model}", "components": SPEC["components"]}
    return jsonschema.Draft202012Validator(schema).is_valid(body)


def takes(provider: providers.Provider, secret: str) -> bool:
    try:
        provider.check_secret(secret)
    except providers.BadSecret:
        return False
    return True


def _b64(data: bytes, padding: int) -> str:
    text = base64.b64encode(data).decode()
    return text.rstrip("=") + "=" * min(padding, len(text) - len(text.rstrip("=")))


# Near misses of every rule: whitespace and control characters at either end or inside,
# whsec_ with canonical, non-canonical, short, long and partly padded base64, other alphabets.
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_EDGE = st.sampled_from(["", " ", "\t", "\n", "\u00a0", "\u2028", "\u200b", "\ufeff", "\x00",
                         "\x7f", "\x85", "=", "==", "A", "-", "_", "+", "/"])
_BASE64 = st.builds(lambda data, pad, cut: _b64(data, pad)[:cut] if cut else _b64(data, pad),
                    st.binary(min_size=20, max_size=68), st.integers(0, 2),
                    st.integers(0, 96))
SECRETS = st.one_of(
    st.builds(lambda a, b, c: a + b + c, _EDGE, _TEXT, _EDGE),
    st.builds(lambda a, b, c: "whsec_" + a + b + c, _EDGE, _TEXT, _EDGE),
    st.builds(lambda a, b: "whsec_" + a + b, _BASE64, _EDGE),
    st.builds(lambda b, i, ch: "whsec_" + b[:i] + ch + b[i + 1:], _BASE64, st.integers(0, 90),
              st.sampled_from("AQgwBRhx=+/-_ ")),
)


@pytest.mark.parametrize("name", providers.names())
@settings(max_examples=400, deadline=None)
@given(secret=SECRETS)
@example(secret="whsec_" + base64.b64encode(bytes(24)).decode())  # 24 bytes: the shortest
@example(secret="whsec_" + base64.b64encode(bytes(64)).decode().rstrip("="))  # the longest
@example(secret="whsec_" + base64.b64encode(bytes(65)).decode())  # one byte too long
@example(secret="whsec_" + base64.b64encode(bytes(66)).decode())  # 22 whole groups
@example(secret="whsec_" + base64.b64encode(bytes(63)).decode())  # 21 whole groups
@example(secret="whsec_" + base64.b64encode(bytes(26)).decode().rstrip("="))  # 3k+2, unpadded
@example(secret="whsec_" + base64.b64encode(b"\x01" * 25).decode()[:-3] + "R==")  # not canonical
@example(secret="whsec_" + base64.b64encode(bytes(23)).decode())  # one byte too short
@example(secret="whsec_x")
@example(secret="whsec_")
@example(secret=" sec")
def test_each_providers_secret_pattern_is_its_check(name, secret):
    """A secret matches the provider's published pattern exactly when check_secret takes
    it (within the API's 512 characters), in Python's regex engine, which the fuzzer uses."""
    provider = providers.provider(name)
    if not 1 <= len(secret) <= MAX_SECRET:
        return
    assert (re.fullmatch(provider.secret_pattern, secret) is not None) == takes(provider, secret)


@pytest.mark.parametrize("name", providers.names())
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_what_the_pattern_generates_the_provider_takes(name, data):
    provider = providers.provider(name)
    secret = data.draw(st.from_regex(provider.secret_pattern, fullmatch=True)
                       .filter(lambda s: len(s) <= MAX_SECRET))
    assert takes(provider, secret)


@pytest.mark.parametrize("header", sorted(gateway_schemas.RESERVED_HEADERS))
def test_the_gateways_own_header_names_are_refused_by_the_schema_in_any_case(header):
    for spelt in (header, header.upper(), header.title()):
        dest = {"url": "http://127.0.0.1:5678/", "headers": {spelt: "x"}}
        assert not valid(dest, "Destination")
    assert valid({"url": "http://127.0.0.1:5678/", "headers": {"X-" + header: "x"}},
                 "Destination")
    assert not valid({"url": "http://x/", "headers": {"Bad Name": "x"}}, "Destination")
