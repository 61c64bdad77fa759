"""The ingest URL is public: bad input via a real gunicorn gets docs/webhooks/README.md's 4xx with
nothing stored, and nothing from the body reaches the log (both backends)."""
from __future__ import annotations

import json

import pytest
import requests

from tests.support import Api, Server, new_token

from .support import KEY, SECRET, signed

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def public(e2e_url, tmp_path_factory):
    from .support import register
    register()
    log = tmp_path_factory.mktemp("log") / "server.log"
    s = Server(e2e_url, workers=2, threads=4, log_path=log,
               env={"KEYSTORE_SECRET_KEY": KEY, "KEYSTORE_ACCESS_LOG": "true",
                    "KEYSTORE_RELAY_IN_SERVE": "false"}).start()
    s.log_file = log
    yield s
    s.stop()


@pytest.fixture(scope="module")
def ingest(public, e2e_url):
    # the `testing` provider lives in the tests: the server knows the real ones only
    token = new_token(e2e_url, "public", "operator")
    status, body, _ = Api(public.url, token).post("/v1/sources", {
        "name": "pub", "provider": "generic", "secrets": [SECRET],
        "signature": {"header": "X-Sig", "algorithm": "sha256", "encoding": "hex"},
        "event_id": {"json": ["/id"]}, "destination": {"url": "http://127.0.0.1:9/"}})
    assert status == 201, body
    return public.url + "/hooks/" + body["source"]["ingest_url"].rsplit("/", 1)[1], token


def sig(body: bytes) -> dict:
    return {"X-Sig": signed(body, None)["X-Test-Signature"], "Content-Type": "application/json"}


def test_good_then_every_bad_input(public, ingest):
    url, token = ingest
    good = json.dumps({"id": "e-1", "card": "BODY-s3cr3t-8812"}).encode()
    assert requests.post(url, data=good, headers=sig(good), timeout=10).status_code == 202
    cases = [
        (b"not json", sig(b"not json"), 400),  # a JSON pointer rule needs a JSON body
        (json.dumps({"no_id": 1}).encode(), None, 400),  # no event id
        (json.dumps({"id": 12.5}).encode(), None, 400),  # not a usable id
        (json.dumps({"id": True}).encode(), None, 400),  # true is not an id
        (json.dumps({"id": "  "}).encode(), None, 400),  # nor blank
        (json.dumps({"id": "e-3"}).encode(), {"X-Sig": "00" * 32}, 401),
        (json.dumps({"id": "e-3"}).encode(), {"X-Sig": "²" * 10}, 401),
        (json.dumps({"id": "e-3"}).encode(), {}, 401),
    ]
    for body, headers, status in cases:
        r = requests.post(url, data=body, headers=sig(body) if headers is None else headers,
                          timeout=10)
        assert r.status_code == status, (body, r.status_code, r.text)
        assert r.json()["error"]["code"] in ("invalid_request", "invalid_signature")
    chunked = iter([json.dumps({"id": "e-big"}).encode(), b" " * (2 * MIB)])
    r = requests.post(url, data=chunked, headers={"X-Sig": "0"}, timeout=30)
    assert r.status_code == 413
    session = requests.Session()
    for _ in range(3):  # keep-alive: the 413 is seen, not a reset
        r = session.post(url, data=b"{" + b" " * (3 * MIB), headers={"X-Sig": "0"}, timeout=30)
        assert r.status_code == 413
    r = requests.post(url.rsplit("/", 1)[0] + "/" + "x" * 43, data=b"{" + b" " * (3 * MIB),
                      timeout=30)
    assert r.status_code == 404  # an unknown source before its body is read
    status, page, _ = Api(public.url, token).get("/v1/deliveries")
    assert [d["event_id"] for d in page["deliveries"]] == ["e-1"]  # nothing else stored
    log = public.log_file.read_text()
    assert "BODY-s3cr3t-8812" not in log and "/hooks/" in log
