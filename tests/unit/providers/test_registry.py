"""What holds for every registered provider, the next one too: it has its own test module,
its numbers are sound, and on any headers and body at all it answers or raises only
InvalidSignature / MissingEventId (the ingest path is public)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keystore_service.gateway import providers
from keystore_service.gateway.providers import (
    FORWARDING_WINDOW_SECONDS,
    TTL_MARGIN_SECONDS,
    InvalidSignature,
    MissingEventId,
    Provider,
)
from keystore_service.gateway.providers._keys import valid_pointer

from .support import MALFORMED, NOW, inbound

HERE = Path(__file__).parent
DOC = Path(__file__).resolve().parents[3] / "docs" / "webhooks" / "providers.md"
NAMES = providers.names()
# A config per provider under which its rules run; generic's signs with a header.
CONFIGS = {name: {} for name in NAMES} | {"generic": {
    "signature": {"header": "X-Sig", "algorithm": "sha256", "encoding": "hex"},
    "event_id": {"json": ["/id", "/n"]}}}
# Every header any provider reads, so the fuzz reaches past "header missing".
HEADER_NAMES = ["Stripe-Signature", "X-Hub-Signature-256", "X-GitHub-Delivery",
                "X-Shopify-Hmac-Sha256", "X-Shopify-Webhook-Id", "X-Shopify-Event-Id",
                "X-Slack-Signature", "X-Slack-Request-Timestamp", "webhook-id",
                "webhook-timestamp", "webhook-signature", "svix-id", "svix-timestamp",
                "svix-signature", "X-Sig"]


def test_the_six_providers_of_the_contract_are_registered():
    assert NAMES == ["generic", "github", "shopify", "slack", "standard", "stripe"]


@pytest.mark.parametrize("name", NAMES)
def test_every_provider_has_its_own_test_module(name):
    # Adding a provider is one module in keystore_service/gateway/providers and this file.
    test = HERE / f"test_{name}.py"
    assert test.is_file(), f"add {test.relative_to(HERE.parents[2])}"
    assert f"providers.{name} import PROVIDER" in test.read_text()


@pytest.mark.parametrize("name", NAMES)
def test_every_provider_module_is_registered_under_its_own_name(name):
    assert isinstance(providers.provider(name), Provider)
    assert providers.provider(name).name == name


@pytest.mark.parametrize("name", NAMES)
def test_the_numbers_of_every_provider_are_sound(name):
    provider = providers.provider(name)
    assert 0 < provider.retry_window_seconds <= 30 * 24 * 3600
    assert all(valid_pointer(p) and p for p in provider.volatile)
    assert provider.docs.startswith("https://") or name == "generic"
    assert provider.default_ttl_seconds() == max(provider.retry_window_seconds,
                                                 FORWARDING_WINDOW_SECONDS) + TTL_MARGIN_SECONDS
    provider.validate_config(CONFIGS[name])
    if name != "generic":
        with pytest.raises(ValueError):
            provider.validate_config({"signature": None})


@pytest.mark.parametrize("name", NAMES)
def test_the_docs_table_gives_each_providers_default_ttl(name):
    # docs/webhooks/providers.md states the default TTL in seconds; it must be the code's.
    section = DOC.read_text().split(f"<!-- provider: {name} -->")[1].split("<!--")[0]
    assert f"{providers.provider(name).default_ttl_seconds():,} s" in section


def _call(name: str, headers, body: bytes, now: int, secrets) -> None:
    """Both rules, as the ingest calls them; only the two contract errors may escape."""
    provider, config = providers.provider(name), CONFIGS[name]
    try:
        provider.verify(inbound(headers, body, now), secrets, config)
    except InvalidSignature as error:
        assert "\n" not in str(error)
    answer = provider.handshake(inbound(headers, body, now))
    assert answer is None or isinstance(answer, dict)
    try:
        event_id = provider.event_id(inbound(headers, body, now), config)
    except MissingEventId as error:
        assert "\n" not in str(error)
        return
    assert isinstance(event_id, str) and 1 <= len(event_id) <= 512
    assert not re.search("[\x00-\x1f\x7f-\x9f\ud800-\udfff]", event_id)


header_values = st.one_of(st.sampled_from(MALFORMED), st.text(max_size=80),
                          st.from_regex(r"t=[0-9]{1,12}(,v1=[0-9a-f]{0,64})*", fullmatch=True),
                          st.from_regex(r"(v1,[A-Za-z0-9+/=]{0,44} ?){0,3}", fullmatch=True))
bodies = st.one_of(st.binary(max_size=200),
                   st.sampled_from([b"", b"{}", b"[]", b"null", b'{"id": "evt_1", "n": 2}',
                                    b'{"type": "url_verification", "challenge": "c"}',
                                    b'{"event_id": "Ev1"}', b"[" * 5000]))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=300, derandomize=True)
@given(headers=st.lists(st.tuples(st.sampled_from(HEADER_NAMES), header_values), max_size=8),
       body=bodies, skew=st.integers(-(2**70), 2**70),
       secrets=st.sampled_from([[], ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], ["a", "b"]]))
def test_any_delivery_at_all_gets_only_the_contracts_errors(name, headers, body, skew,
                                                            secrets):
    _call(name, headers, body, NOW + skew, secrets)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("value", MALFORMED)
def test_every_header_of_every_provider_malformed_alone(name, value):
    for header in HEADER_NAMES:
        _call(name, {header: value}, b'{"id": "evt_1", "n": 2}', NOW, ["secret"])
