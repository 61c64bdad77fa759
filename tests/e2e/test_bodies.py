"""Request bodies at and over the limit, through a real gunicorn (issue 13, item 5)."""
from __future__ import annotations

import json

import pytest
import requests
from keystore_client import KeyStore, NotFound, PayloadTooLarge

from tests.support import Api

MIB = 1024 * 1024


def padded(claim: dict, size: int) -> bytes:
    """A valid claim followed by spaces up to `size` bytes (still valid JSON)."""
    raw = json.dumps(claim).encode()
    return raw + b" " * (size - len(raw))


def chunked(data: bytes, piece: int = 64 * 1024):
    """A generator body: requests sends it with Transfer-Encoding: chunked."""
    for i in range(0, len(data), piece):
        yield data[i:i + piece]


def post_chunked(server, token, data: bytes, session=None):
    return (session or requests).post(server.url + "/v1/claim", data=chunked(data), timeout=30,
                                      headers={"Authorization": f"Bearer {token}",
                                               "Content-Type": "application/json"})


def test_a_chunked_body_over_the_limit_is_413_and_stores_nothing(server, token):
    claim = {"scope": "bodies", "key": "chunked-big", "payload": {"a": 1}}
    r = post_chunked(server, token, padded(claim, int(2.5 * MIB)))
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
    status, body, _ = Api(server.url, token).get("/v1/keys", scope="bodies",
                                                  key="chunked-big")
    assert status == 404, body  # v0.1: 201, the first MiB was taken as the whole body


@pytest.mark.parametrize("size,status", [(1000, 201), (MIB, 201), (MIB + 1, 413)])
def test_chunked_bodies_up_to_the_limit_are_taken_whole(server, token, size, status):
    claim = {"scope": "bodies", "key": f"chunked-{size}", "payload": {"a": 1}}
    r = post_chunked(server, token, padded(claim, size))
    assert r.status_code == status, r.text


def test_a_keep_alive_client_sees_every_413_then_carries_on(server, token):
    """The project's own client on one reused session: v0.1 often got a connection reset
    (the server answered before reading the body, then closed with it unread)."""
    session = requests.Session()
    ks = KeyStore(server.url, token, session=session)
    for n in range(12):
        with pytest.raises(PayloadTooLarge):
            ks.claim("bodies", f"huge-{n}", payload="x" * (3 * MIB))
    assert ks.claim("bodies", "small-after", payload={"a": 1}).outcome == "acquired"
    with pytest.raises(NotFound):
        ks.lookup("bodies", "huge-0")
    for _ in range(4):  # chunked oversize bodies on the same session too
        assert post_chunked(server, token, b"{" + b" " * (2 * MIB), session).status_code == 413
    assert session.get(server.url + "/healthz", timeout=10).status_code == 200


def test_a_wrong_token_with_a_big_body_gets_its_401(server):
    session = requests.Session()
    for _ in range(12):
        r = session.post(server.url + "/v1/claim", data=b"{" + b" " * (3 * MIB),
                         headers={"Authorization": "Bearer ks_wrong"}, timeout=30)
        assert r.status_code == 401
