"""GitHub: our verifier against GitHub's own, @octokit/webhooks-methods (on Node, see
conftest.py), and every malformed X-Hub-Signature-256 / X-GitHub-Delivery refused cleanly."""
from __future__ import annotations

import hashlib
import hmac
import random

import pytest

from keystore_service.gateway.providers import InvalidSignature, MissingEventId
from keystore_service.gateway.providers.github import PROVIDER

from .support import MALFORMED, inbound

SECRET = "It's a Secret to Everybody"  # the example of GitHub's docs
SECOND = "rotated-secret-2"
BODY = b"Hello, World!"
# The test vector published in GitHub's "Validating webhook deliveries".
DOCS_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
DELIVERY = "72d3162e-cc78-11e3-81ab-4c9367dc0958"


def ours(body: bytes, signature, secrets=(SECRET,)) -> bool:
    headers = {"X-Hub-Signature-256": signature} if signature is not None else {}
    try:
        PROVIDER.verify(inbound(headers, body), list(secrets), {})
        return True
    except InvalidSignature:
        return False


def sha256(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_githubs_published_test_vector():
    assert ours(BODY, DOCS_SIGNATURE)


def _cases(rng: random.Random) -> list[dict]:
    """Valid, tampered, wrong secret, rotation, and malformed signatures over varied text."""
    alphabet = "abc {}\":,é€😀\n\t\\/" + "".join(map(chr, range(0x20, 0x7f)))
    cases = []
    for i in range(400):
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80)))
        secret = "".join(rng.choice(alphabet[:-20]) for _ in range(rng.randint(1, 30)))
        other = secret + "x"
        secrets = [secret, other] if i % 3 == 0 else [secret]
        signer = rng.choice([secret, other, "wrong"])
        signature = sha256(body.encode(), signer)
        kind = i % 8
        if kind == 1:
            body += "!"  # tampered after signing
        elif kind == 2:
            signature = signature.upper()
        elif kind == 3:
            signature = signature[7:]  # no sha256= prefix
        elif kind == 4:
            signature = "sha1=" + signature[7:]
        elif kind == 5:
            signature = signature[:-2]
        elif kind == 6:
            signature = signature + " "
        cases.append({"secrets": secrets, "body": body, "signature": signature})
    return cases


def test_we_accept_exactly_what_octokit_accepts(octokit):
    cases = _cases(random.Random(14))
    answers = octokit(cases)
    accepted = 0
    for case, answer in zip(cases, answers, strict=True):
        mine = ours(case["body"].encode(), case["signature"], case["secrets"])
        assert mine == answer["verdict"], case
        # and octokit's own signature (what GitHub sends) passes here
        assert ours(case["body"].encode(), answer["signed"], case["secrets"][:1]), case
        accepted += mine
    assert 50 < accepted < 350  # the mix holds both outcomes in number


def test_valid_tampered_wrong_secret_and_rotation_with_octokit(octokit):
    cases = [
        {"secrets": [SECRET], "body": "Hello, World!", "signature": DOCS_SIGNATURE},
        {"secrets": [SECRET], "body": "Hello, World?", "signature": DOCS_SIGNATURE},
        {"secrets": ["not it"], "body": "Hello, World!", "signature": DOCS_SIGNATURE},
        {"secrets": ["not it", SECRET], "body": "Hello, World!", "signature": DOCS_SIGNATURE},
    ]
    assert [a["verdict"] for a in octokit(cases)] == [True, False, False, True]
    assert [ours(c["body"].encode(), c["signature"], c["secrets"]) for c in cases] == \
        [True, False, False, True]


def test_an_empty_body_is_where_octokit_throws(octokit):
    # GitHub never sends one; a correctly signed empty body is accepted here.
    [answer] = octokit([{"secrets": [SECRET], "body": "", "signature": sha256(b"")}])
    assert answer["verdict"] == "error"
    assert ours(b"", sha256(b""))


@pytest.mark.parametrize("value", MALFORMED + [None, DOCS_SIGNATURE.upper(),
                                               DOCS_SIGNATURE + ", " + DOCS_SIGNATURE,
                                               "sha256=" + DOCS_SIGNATURE, " " + DOCS_SIGNATURE])
def test_a_malformed_signature_header_is_invalid_signature(value):
    assert not ours(BODY, value)


def test_the_legacy_sha1_header_alone_is_not_enough():
    legacy = "sha1=" + hmac.new(SECRET.encode(), BODY, hashlib.sha1).hexdigest()
    with pytest.raises(InvalidSignature):
        PROVIDER.verify(inbound({"X-Hub-Signature": legacy}, BODY), [SECRET], {})


def test_the_event_id_is_the_delivery_guid():
    assert PROVIDER.event_id(inbound({"X-GitHub-Delivery": DELIVERY}), {}) == DELIVERY


@pytest.mark.parametrize("value", [None, "", "x" * 513, "a\x00b", "\x85", "\ud800",
                                   "a\r\nb"])
def test_an_unusable_delivery_id_is_missing_event_id(value):
    headers = {"X-GitHub-Delivery": value} if value is not None else {}
    with pytest.raises(MissingEventId):
        PROVIDER.event_id(inbound(headers), {})


@pytest.mark.parametrize("value", [" ", "²", "é", str(2**63), "x" * 512])
def test_any_other_text_is_kept_exactly_as_the_id(value):
    # The key rule keeps ids as sent: no trimming, no normalisation.
    assert PROVIDER.event_id(inbound({"X-GitHub-Delivery": value}), {}) == value


def test_a_repeated_header_counts_its_last_value():
    headers = [("X-Hub-Signature-256", DOCS_SIGNATURE), ("X-Hub-Signature-256", "sha256=0")]
    with pytest.raises(InvalidSignature):
        PROVIDER.verify(inbound(headers, BODY), [SECRET], {})
