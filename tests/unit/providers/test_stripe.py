"""Stripe: our verifier against stripe's own (stripe.Webhook.construct_event and
WebhookSignature.verify_header), and every malformed Stripe-Signature refused cleanly."""
from __future__ import annotations

import json

import pytest
import stripe
from hypothesis import given, settings
from hypothesis import strategies as st

from keystore_service.gateway.providers import BadSecret, InvalidSignature, MissingEventId
from keystore_service.gateway.providers.stripe import PROVIDER

from .support import MALFORMED, NOW, inbound, stripe_clock, texts

SECRET = "whsec_test_primary_5b1f0c"
SECOND = "whsec_test_rolled_9e3a41"
BODY = json.dumps({"id": "evt_1QxAbC", "object": "event", "type": "invoice.paid",
                   "pending_webhooks": 2, "data": {"object": {"id": "in_1"}}}).encode()


def header(body: bytes, secret: str = SECRET, t: int = NOW) -> str:
    """Stripe-Signature as Stripe's own library writes it."""
    return stripe.WebhookSignature.generate_signature_header(body.decode(), secret, t)


def ours(body: bytes, signature, secrets=(SECRET,), now: int = NOW) -> bool:
    try:
        PROVIDER.verify(inbound({"Stripe-Signature": signature} if signature is not None
                                else {}, body, now), list(secrets), {})
        return True
    except InvalidSignature:
        return False


def theirs(body: bytes, signature: str, secrets=(SECRET,), now: int = NOW) -> bool:
    """stripe's verify_header with its 300 s default tolerance, each secret in turn (the
    library takes one secret; rotation is trying both)."""
    with stripe_clock(now):
        for secret in secrets:
            try:
                stripe.WebhookSignature.verify_header(body, signature, secret, 300)
                return True
            except stripe.SignatureVerificationError:
                pass
    return False


def test_a_valid_event_passes_both_and_its_id_is_the_body_id():
    signature = header(BODY)
    with stripe_clock(NOW):
        event = stripe.Webhook.construct_event(BODY, signature, SECRET)
    assert ours(BODY, signature)
    assert PROVIDER.event_id(inbound({"Stripe-Signature": signature}, BODY), {}) == event.id


@pytest.mark.parametrize("case", ["tampered body", "wrong secret", "old timestamp"])
def test_refused_by_both(case):
    body, signature, now = BODY, header(BODY), NOW
    if case == "tampered body":
        body = BODY.replace(b"invoice.paid", b"invoice.void")
    elif case == "wrong secret":
        signature = header(BODY, secret="whsec_someone_else")
    else:
        now = NOW + 301
    assert not theirs(body, signature, now=now)
    assert not ours(body, signature, now=now)


def test_the_edge_of_the_tolerance_is_inside_for_both():
    assert theirs(BODY, header(BODY), now=NOW + 300) and ours(BODY, header(BODY), now=NOW + 300)


def test_rotation_either_secret_of_the_source_and_either_v1_of_the_header():
    # Stripe, while an endpoint's secret is rolled, signs with both: two v1 entries.
    both = header(BODY, SECOND) + ",v1=" + header(BODY, SECRET).split("v1=")[1]
    assert ours(BODY, header(BODY, SECOND), secrets=(SECRET, SECOND))
    assert ours(BODY, both) and theirs(BODY, both)
    assert not ours(BODY, header(BODY, SECOND), secrets=(SECRET,))


def test_a_future_timestamp_is_refused_here_though_stripe_accepts_it():
    # docs/webhooks/providers.md: 300 s either way; stripe's library checks only the past.
    signature = header(BODY, t=NOW + 301)
    assert theirs(BODY, signature)
    assert not ours(BODY, signature)


@settings(max_examples=300, derandomize=True)
@given(text=texts, signer=st.sampled_from([SECRET, SECOND, "whsec_other"]),
       rotation=st.booleans(), offset=st.integers(-700, 300), tamper=st.booleans(),
       decoy=st.booleans(), v0=st.booleans())
def test_we_accept_exactly_what_stripe_accepts(text, signer, rotation, offset, tamper, decoy,
                                               v0):
    body = text.encode()
    signature = header(body, signer, NOW + offset)
    if decoy:
        signature += ",v1=" + "0" * 64
    if v0:
        signature += ",v0=" + "f" * 64  # test-mode v0 entries are ignored by both
    delivered = body + b"!" if tamper else body
    secrets = (SECRET, SECOND) if rotation else (SECRET,)
    assert ours(delivered, signature, secrets) == theirs(delivered, signature, secrets)


def v1(t: str) -> str:
    """The v1 that stripe's library expects for `t` (it signs int(t) as a decimal)."""
    try:
        return header(BODY, t=int(t)).split("v1=")[1]
    except ValueError:
        return "0" * 64


# Now, written so that Python's int() reads it but it is not plain ASCII digits.
NOW_SPELLED_OTHERWISE = [f" {NOW}", f"{NOW} ", f"+{NOW}", f"{NOW:_}",
                         "".join(chr(0x660 + int(d)) for d in str(NOW))]  # Arabic-Indic


@pytest.mark.parametrize("value", MALFORMED)
def test_a_malformed_header_is_invalid_signature(value):
    assert not ours(BODY, value)


@pytest.mark.parametrize("t", MALFORMED + NOW_SPELLED_OTHERWISE + ["0" * 16, "9" * 15])
def test_a_malformed_t_is_invalid_signature_even_with_a_matching_v1(t):
    assert not ours(BODY, f"t={t},v1={v1(t)}")


@pytest.mark.parametrize("t", NOW_SPELLED_OTHERWISE)
def test_stripes_library_takes_what_int_takes_and_we_do_not(t):
    # Stripe writes t= in ASCII digits; anything else is refused here as malformed.
    assert theirs(BODY, f"t={t},v1={v1(t)}")


@pytest.mark.parametrize("signature", [
    None,                                           # no header
    f"v1={v1(str(NOW))}",                           # no t=
    f"t={NOW}",                                     # no v1
    f"t={NOW},t={NOW},v1={v1(str(NOW))}",           # two t= (a repeated, folded header)
    f"t={NOW},v1={v1(str(NOW)).upper()}",           # upper-case hex (the library agrees)
    f"t={NOW},v1={v1(str(NOW))[:-1]}",              # hex of the wrong length
    f"t={NOW},v1={v1(str(NOW))}=x",
    f"t={NOW}, v1={v1(str(NOW))}",                  # a space: " v1" is another scheme
    f"T={NOW},V1={v1(str(NOW))}",
])
def test_malformed_structures_are_invalid_signature(signature):
    assert not ours(BODY, signature)


@pytest.mark.parametrize("signature", [
    f"t=0{NOW},v1={v1(str(NOW))}",  # leading zeros: signed as the decimal, like the library
    f"{header(BODY)}, {header(BODY)}",  # a repeated header folded by the server: " t" is
])                                      # another element, the first t= and v1 still hold
def test_unusual_but_well_signed_headers_pass_both(signature):
    assert ours(BODY, signature) and theirs(BODY, signature)


def test_no_secrets_fails_closed():
    assert not ours(BODY, header(BODY), secrets=())


@pytest.mark.parametrize("body", [b"", b"not json", b"[]", b'{"id": 7}', b'{"id": ""}',
                                  b'{"id": null}', b'{"type": "x"}', b"\xff\xfe",
                                  b"[" * 100_000, json.dumps({"id": "x" * 513}).encode(),
                                  b'{"id": "evt\\u0000"}', b'{"id": "evt\\ud800"}'])
def test_no_usable_id_in_the_body_is_missing_event_id(body):
    with pytest.raises(MissingEventId):
        PROVIDER.event_id(inbound({}, body), {})


@pytest.mark.parametrize("secret", ["whsec_", "sk_live_1", "", " whsec_x", "whsec_x\n",
                                    "whsec_" + "x" * 2000])
def test_secrets_that_are_not_whole_whsec_strings_are_refused(secret):
    with pytest.raises(BadSecret):
        PROVIDER.check_secret(secret)


def test_the_secret_is_the_whole_whsec_string():
    PROVIDER.check_secret(SECRET)
    # keyed with the whole string, prefix included (as Stripe's libraries do)
    signature = header(BODY, SECRET)
    assert not ours(BODY, signature, secrets=(SECRET.removeprefix("whsec_"),))
