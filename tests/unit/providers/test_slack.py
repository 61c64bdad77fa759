"""Slack: our verifier against slack_sdk's SignatureVerifier, the url_verification handshake,
the event id, and every malformed header refused cleanly."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.signature import SignatureVerifier

from keystore_service.gateway.providers import InvalidSignature, MissingEventId
from keystore_service.gateway.providers.slack import PROVIDER

from .support import MALFORMED, NOW, SlackClock, inbound, plain_secrets, texts

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # the format of Slack's signing secrets
SECOND = "0c1bd2a9e77e4c6c1f3a9b8d7e6f5a4b"
BODY = json.dumps({"type": "event_callback", "event_id": "Ev08MFMKH6",
                   "event": {"type": "app_mention", "text": "<@U0LAN0Z89> hi"}}).encode()


def headers(body: bytes, secret: str = SECRET, timestamp: str = str(NOW)) -> dict:
    """The two headers as Slack's own SDK computes them."""
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature}


def ours(body: bytes, sent: dict, secrets=(SECRET,), now: int = NOW) -> bool:
    try:
        PROVIDER.verify(inbound(sent, body, now), list(secrets), {})
        return True
    except InvalidSignature:
        return False


def theirs(body: bytes, sent: dict, secrets=(SECRET,), now: int = NOW) -> bool:
    return any(SignatureVerifier(s, clock=SlackClock(now)).is_valid_request(body, sent)
               for s in secrets)


@pytest.mark.parametrize("case", ["valid", "tampered", "wrong secret", "old", "future",
                                  "rotation", "edge"])
def test_each_case_as_slack_sdk_decides(case):
    body, sent, secrets, now = BODY, headers(BODY), (SECRET,), NOW
    if case == "tampered":
        body = BODY.replace(b"hi", b"ho")
    elif case == "wrong secret":
        sent = headers(BODY, "someone-else")
    elif case == "old":
        now = NOW + 301
    elif case == "future":
        now = NOW - 301
    elif case == "rotation":
        sent, secrets = headers(BODY, SECOND), (SECRET, SECOND)
    elif case == "edge":
        now = NOW - 300
    expected = case in ("valid", "rotation", "edge")
    assert theirs(body, sent, secrets, now) is expected
    assert ours(body, sent, secrets, now) is expected


@settings(max_examples=300, derandomize=True)
@given(text=texts, secret=plain_secrets, signer=st.sampled_from(["it", "other"]),
       rotation=st.booleans(), offset=st.integers(-700, 700), tamper=st.booleans(),
       zeros=st.booleans())
def test_we_accept_exactly_what_slack_sdk_accepts(text, secret, signer, rotation, offset,
                                                  tamper, zeros):
    body = text.encode()
    timestamp = ("00" if zeros else "") + str(NOW + offset)  # signed as written, by both
    sent = headers(body, secret if signer == "it" else secret + "!", timestamp)
    delivered = body + b"\n" if tamper else body
    secrets = (SECOND, secret) if rotation else (secret,)
    assert ours(delivered, sent, secrets) == theirs(delivered, sent, secrets)


@pytest.mark.parametrize("value", MALFORMED)
def test_a_malformed_signature_is_invalid_signature(value):
    assert not ours(BODY, {**headers(BODY), "X-Slack-Signature": value})


@pytest.mark.parametrize("value", MALFORMED + [f" {NOW}", f"+{NOW}", f"{NOW:_}",
                                               "".join(chr(0x660 + int(d)) for d in str(NOW))])
def test_a_malformed_timestamp_is_invalid_signature_even_when_signed_as_written(value):
    try:
        sent = headers(BODY, timestamp=value)  # signed over exactly this header value
    except UnicodeEncodeError:  # the SDK cannot sign a lone surrogate either
        sent = {**headers(BODY), "X-Slack-Request-Timestamp": value}
    assert not ours(BODY, sent)


def test_a_non_ascii_signature_is_refused_where_slack_sdk_raises():
    sent = {**headers(BODY), "X-Slack-Signature": "v0=é"}
    with pytest.raises(TypeError):
        theirs(BODY, sent)
    assert not ours(BODY, sent)


@pytest.mark.parametrize("missing", ["X-Slack-Signature", "X-Slack-Request-Timestamp"])
def test_a_missing_header_is_invalid_signature(missing):
    sent = headers(BODY)
    del sent[missing]
    assert not ours(BODY, sent)


def test_url_verification_answers_its_challenge():
    body = json.dumps({"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "type": "url_verification",
                       "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
                      ).encode()
    assert ours(body, headers(body))
    assert PROVIDER.handshake(inbound(headers(body), body)) == {
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}


@pytest.mark.parametrize("body", [
    BODY, b"", b"not json", b"[]", b"\xff", b"[" * 100_000,
    b'{"type": "url_verification"}', b'{"type": "url_verification", "challenge": 5}',
    b'{"type": "url_verification", "challenge": ""}',
    json.dumps({"type": "url_verification", "challenge": "c" * 1025}).encode(),
    b'{"type": "event_callback", "challenge": "x"}',
])
def test_anything_else_is_no_handshake(body):
    assert PROVIDER.handshake(inbound({}, body)) is None


def test_the_event_id_is_the_bodys_event_id():
    assert PROVIDER.event_id(inbound({}, BODY), {}) == "Ev08MFMKH6"


@pytest.mark.parametrize("body", [b"", b"token=x&command=%2Fdeploy", b"[]", b"\xff",
                                  b'{"event_id": 12}', b'{"event_id": ""}', b"[" * 100_000,
                                  b'{"event_id": "Ev\\u0007"}', b'{"type": "app_rate_limited"}'])
def test_no_usable_event_id_is_missing_event_id(body):
    with pytest.raises(MissingEventId):
        PROVIDER.event_id(inbound({}, body), {})
