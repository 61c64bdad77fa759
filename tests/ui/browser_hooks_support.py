"""What the browser tests of the Webhooks section share (test_browser_hooks.py,
test_browser_bulk.py): a real `keystore serve` whose workers run the relay, the sink it
forwards to, a generic source, signed events sent to its ingest URL, and waiting for a
delivery's state."""
from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest
import requests

from keystore_service.storage import migrate
from tests.gateway.support import KEY, Sink
from tests.support import Api, Server, new_token

SECRET = "generic-signing-secret"
WAIT_S = 20  # for the relay to forward, on a busy 2-core machine (it takes milliseconds)


@pytest.fixture(scope="module",
                params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request, tmp_path_factory):
    """A real `keystore serve` (2 workers, each with its relay) with the gateway's key, and
    acme's client and operator ("ana") tokens. A test module's SERVE_ENV adds settings."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('hooks')}/keystore.db"
        migrate.upgrade(url)
    else:
        url = request.getfixturevalue("pg_database")("_hooks")
    operator = new_token(url, "acme", "operator", "ana")
    server = Server(url, workers=2, threads=4, env={"KEYSTORE_SECRET_KEY": KEY, **getattr(request.module, "SERVE_ENV", {})},
                    log_path=tmp_path_factory.mktemp("log") / "server.log")
    server.start()
    try:
        yield request.param, server, operator
    finally:
        server.kill()


@pytest.fixture
def sink():
    s = Sink()
    yield s
    s.close()


def source(served, sink, name: str) -> str:
    """A generic source (HMAC of the body in X-Signature, event id in X-Event-Id) forwarding
    to the sink; its ingest URL."""
    _, server, operator = served
    status, body, _ = Api(server.url, operator).post("/v1/sources", {
        "name": name, "provider": "generic", "secrets": [SECRET],
        "signature": {"header": "X-Signature", "algorithm": "sha256", "encoding": "hex",
                      "prefix": "sha256="},
        "event_id": {"header": "X-Event-Id"}, "destination": {"url": sink.url}})
    assert status == 201, body
    return body["source"]["ingest_url"]


def send(ingest_url: str, event_id: str, payload: dict) -> int:
    body = json.dumps(payload).encode()
    signature = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return requests.post(ingest_url, data=body, timeout=10, headers={
        "Content-Type": "application/json", "X-Event-Id": event_id,
        "X-Signature": "sha256=" + signature}).status_code


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def state(served, source_name: str, event_id: str) -> str:
    _, server, operator = served
    status, body, _ = Api(server.url, operator).get("/v1/deliveries", source=source_name,
                                                    event_id=event_id)
    assert status == 200, body
    return body["deliveries"][0]["state"]
