"""Standard Webhooks: our verifier and our signer against the standardwebhooks library, the
svix-* spelling, the secret format, and every malformed header refused cleanly."""
from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from keystore_service.gateway.providers import BadSecret, InvalidSignature, MissingEventId
from keystore_service.gateway.providers.standard import PROVIDER, secret_key, sign

from .support import MALFORMED, NOW, inbound, standardwebhooks_clock, texts

# The example secret of Svix's docs (24 bytes) and a 32-byte one.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SECOND = "whsec_" + base64.b64encode(bytes(range(32))).decode()
BODY = b'{"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z","data":{}}'
MSG_ID = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"


def library_headers(body: bytes, secret: str = SECRET, ts: int = NOW, msg_id: str = MSG_ID,
                    prefix: str = "webhook-") -> dict:
    """The three headers, signed by the standardwebhooks library itself."""
    signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(ts, UTC),
                                     body.decode())
    return {prefix + "id": msg_id, prefix + "timestamp": str(ts), prefix + "signature": signature}


def ours(body: bytes, sent: dict, secrets=(SECRET,), now: int = NOW) -> bool:
    try:
        PROVIDER.verify(inbound(sent, body, now), list(secrets), {})
        return True
    except InvalidSignature:
        return False


def theirs(body: bytes, sent: dict, secrets=(SECRET,), now: int = NOW) -> bool:
    with standardwebhooks_clock(now):
        for secret in secrets:
            try:
                Webhook(secret).verify(body, sent, json_parse=False)
                return True
            except WebhookVerificationError:
                pass
    return False


@pytest.mark.parametrize("case", ["valid", "tampered", "wrong secret", "old", "future",
                                  "rotation", "two signatures", "edge"])
def test_each_case_as_the_library_decides(case):
    body, sent, secrets, now = BODY, library_headers(BODY), (SECRET,), NOW
    if case == "tampered":
        body = BODY.replace(b"created", b"deleted")
    elif case == "wrong secret":
        sent = library_headers(BODY, SECOND)
    elif case == "old":
        now = NOW + 301
    elif case == "future":
        now = NOW - 301
    elif case == "rotation":
        sent, secrets = library_headers(BODY, SECOND), (SECRET, SECOND)
    elif case == "two signatures":  # the sender's own rotation: a space-separated list
        sent["webhook-signature"] = (library_headers(BODY, SECOND)["webhook-signature"] + " "
                                     + sent["webhook-signature"])
    elif case == "edge":
        now = NOW + 300
    expected = case in ("valid", "rotation", "two signatures", "edge")
    assert theirs(body, sent, secrets, now) is expected
    assert ours(body, sent, secrets, now) is expected


secrets_ = st.binary(min_size=24, max_size=64).map(
    lambda key: "whsec_" + base64.b64encode(key).decode())


@settings(max_examples=300, derandomize=True)
@given(text=texts, secret=secrets_, other=secrets_, signer=st.sampled_from(["it", "other"]),
       rotation=st.booleans(), offset=st.integers(-700, 700), tamper=st.booleans(),
       msg_id=st.from_regex(r"msg_[A-Za-z0-9]{1,27}", fullmatch=True),
       svix=st.booleans(), v1a=st.booleans())
def test_we_accept_exactly_what_the_library_accepts(text, secret, other, signer, rotation,
                                                    offset, tamper, msg_id, svix, v1a):
    body = text.encode()
    sent = library_headers(body, secret if signer == "it" else other, NOW + offset, msg_id)
    if v1a:  # an asymmetric entry: neither checks it
        sent["webhook-signature"] = "v1a,AAAA " + sent["webhook-signature"]
    delivered = body + b"." if tamper else body
    secrets = (other, secret) if rotation else (secret,)
    verdict = theirs(delivered, sent, secrets)
    if svix:  # the library reads webhook-* only; Svix's own libraries read svix-* as well
        sent = {"svix-" + k.removeprefix("webhook-"): v for k, v in sent.items()}
    assert ours(delivered, sent, secrets) == verdict


def test_the_svix_spelling_and_which_one_wins():
    svix = library_headers(BODY, prefix="svix-", msg_id="msg_svix")
    assert ours(BODY, svix)
    assert PROVIDER.event_id(inbound(svix, BODY), {}) == "msg_svix"
    both = {**svix, **library_headers(BODY, msg_id="msg_standard")}
    assert ours(BODY, both)
    assert PROVIDER.event_id(inbound(both, BODY), {}) == "msg_standard"
    # an incomplete webhook-* set does not hide a complete svix-* one
    assert PROVIDER.event_id(inbound({**svix, "webhook-id": "stray"}, BODY), {}) == "msg_svix"


@pytest.mark.parametrize("name", ["webhook-id", "webhook-timestamp", "webhook-signature"])
@pytest.mark.parametrize("value", MALFORMED + [None])
def test_a_malformed_header_is_invalid_signature(name, value):
    sent = library_headers(BODY)
    if value is None:
        del sent[name]
    else:
        sent[name] = value
    if name == "webhook-id" and value:
        return  # another id is merely another message: the signature no longer matches
    assert not ours(BODY, sent)


@pytest.mark.parametrize("signature", [
    "v1", "v1,", "v2,abc", "v1,not base64!", "v1 ,x", "  ", "v1,AAAA v1,BBBB",
])
def test_malformed_signature_lists_are_refused_where_the_library_raises_or_refuses(signature):
    sent = {**library_headers(BODY), "webhook-signature": signature}
    assert not ours(BODY, sent)


def test_a_signature_with_stray_characters_is_refused_as_the_newer_library_does():
    """standardwebhooks before 1.3 decoded base64 leniently and skipped the "!"; 1.3 compares
    the text exactly. We refuse it whichever version is installed."""
    sent = library_headers(BODY)
    good = sent["webhook-signature"]
    sent["webhook-signature"] = good[:10] + "!" + good[10:]
    assert not ours(BODY, sent)
    assert ours(BODY, {**sent, "webhook-signature": good})


def test_a_fractional_or_padded_timestamp_is_refused_though_the_library_floors_it():
    sent = {**library_headers(BODY), "webhook-timestamp": f"{NOW}.9"}
    assert theirs(BODY, sent)
    assert not ours(BODY, sent)


@pytest.mark.parametrize("value", [None, "", "x" * 513, "msg\x00", "msg\x85", "\ud800"])
def test_an_unusable_message_id_is_missing_event_id(value):
    sent = library_headers(BODY)
    if value is None:
        del sent["webhook-id"]
    else:
        sent["webhook-id"] = value
    with pytest.raises(MissingEventId):
        PROVIDER.event_id(inbound(sent, BODY), {})


def test_our_forward_signature_passes_the_library_and_ourselves():
    sent = sign(SECRET, "evt_1", NOW, BODY)
    assert sent == {**library_headers(BODY, msg_id="evt_1"), "webhook-id": "evt_1"}
    assert theirs(BODY, sent) and ours(BODY, sent)


def test_a_body_that_is_not_utf8_is_signed_over_its_bytes():
    body = b"\xff\x00binary"
    sent = sign(SECRET, "evt_2", NOW, body)
    assert ours(body, sent)
    assert not ours(body + b"x", sent)


@pytest.mark.parametrize("secret", [
    "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",                       # no whsec_
    "whsec_", "whsec_" + base64.b64encode(bytes(23)).decode(),  # too short
    "whsec_" + base64.b64encode(bytes(65)).decode(),          # too long
    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS!",                 # not base64
    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw=",                # padding where none belongs
    "whsec_" + "A" * 42 + "B=",                               # non-canonical last bits
    "whsec_MfKQ9r8GKYqr TwjUPD8ILPZIo2LaLaSw", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa€w",
    "whsec_" + base64.urlsafe_b64encode(b"\xfb\xff" * 16).decode(),  # another alphabet
])
def test_secrets_that_are_not_strict_base64_of_24_to_64_bytes_are_refused(secret):
    with pytest.raises(BadSecret):
        PROVIDER.check_secret(secret)
    with pytest.raises(BadSecret):
        sign(secret, "evt", NOW, BODY)


def test_unpadded_secrets_are_the_same_key_as_padded_ones():
    padded = "whsec_" + base64.b64encode(bytes(range(25))).decode()
    assert padded.endswith("=")
    assert secret_key(padded) == secret_key(padded.rstrip("=")) == bytes(range(25))


def test_a_stored_secret_that_is_not_whsec_fails_closed():
    assert not ours(BODY, library_headers(BODY), secrets=("not-a-whsec",))
