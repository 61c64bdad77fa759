"""Test helpers for the gateway: a provider of the tests' own (registered for these tests
only), a local destination that records what it got and answers as scripted, a source made
through the API, signed deliveries to it, forwarding driven by hand (one relay round), the
deliveries the API lists, rows counted, and the `keystore` command with the gateway's key."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

from sqlalchemy import func, select

from keystore_service.gateway import providers
from keystore_service.gateway.providers import Inbound, InvalidSignature, MissingEventId, Provider
from tests.support import KEYSTORE, SECOND

SECRET = "test-secret-1"
KEY = "cNk6cVlTCFCk0NKWaFUBSi1_dBbOG9Z-mUbGkN9yQBw="  # a Fernet key for the tests
# Another spelling of a host, or an address the destination rules refuse: each is 400 where a
# URL is given (a source's destination, a connection's base URL). {port}: a test's own.
SPELLINGS = [
    "http://169%2E254%2E169%2E254/latest/meta-data/",  # accepted by POST and PATCH before
    "http://%30%32%35%32%2E%30%33%37%36%2E%30%32%35%32%2E%30%33%37%36/latest/meta-data/",
    "http://127%2E0%2E0%2E1:{port}/in",  # was forwarded to 127.0.0.1
    "http://2852039166/", "http://0xa9fea9fe/", "http://0251.0376.0251.0376/",
    "http://169.254.43518/", "http://2130706433:{port}/in", "http://127.1:{port}/in",
    "http://169.254.169.254./", "http://[fe80::1%25eth0]/", "http://[::ffff:a9fe:a9fe]/",
    "http://[::FFFF:169.254.169.254]/", "http://[64:ff9b::a9fe:a9fe]/", "http://[::a9fe:a9fe]/",
    "http://[2002:a9fe:a9fe::]/", "http://100.100.100.200/", "HTTP://169.254.169.254/",
    "http://[FD00:EC2::254]/",
]


def _verify(inbound: Inbound, secrets: list[str], config: Any) -> None:
    given = inbound.headers.get("X-Test-Signature")
    if not given:
        raise InvalidSignature("no X-Test-Signature header")
    for secret in secrets:
        want = hmac.new(secret.encode(), inbound.body, hashlib.sha256).hexdigest()
        if providers.equal(want, given):
            return
    raise InvalidSignature("no secret signed this body")


def _event_id(inbound: Inbound, config: Any) -> str:
    value = inbound.headers.get("X-Test-Id")
    if not value:
        raise MissingEventId("no X-Test-Id header")
    return value


TESTING = Provider(name="testing", verify=_verify, event_id=_event_id,
                   event_type=providers.body_event_type,  # the body's "type", as Stripe's
                   retry_window_seconds=3600, docs="tests/gateway/support.py")


def register() -> None:
    providers._load()
    providers.register(TESTING)


def signed(body: bytes, event_id: Optional[str], secret: str = SECRET) -> dict:
    headers = {"X-Test-Signature": hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
               "Content-Type": "application/json"}
    if event_id is not None:
        headers["X-Test-Id"] = event_id
    return headers


class Sink:
    """A destination on loopback: records every request; `answer(n, request)` gives the
    status of the n-th request, 200 by default, or (status, headers), or (status, headers,
    body): a chunked body when the headers say Transfer-Encoding: chunked, a body sent in
    parts when it is a list of (seconds to wait, bytes). `keep_alive`:
    HTTP/1.1 with kept-alive connections (each request notes its client port)."""

    def __init__(self, answer: Callable[[int, dict], Any] = lambda n, r: 200,
                 keep_alive: bool = False):
        self.requests: list[dict] = []
        self.answer = answer
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def do_POST(self):  # noqa: N802 (http.server's API)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                got = {"path": self.path, "headers": dict(self.headers.items()), "body": body,
                       "port": self.client_address[1]}
                with sink._lock:
                    n = len(sink.requests)
                    sink.requests.append(got)
                reply = sink.answer(n, got)
                status, headers, payload = (reply, {}, None) if isinstance(reply, int) else (
                    (*reply, None) if len(reply) == 2 else reply)
                payload = json.dumps({"n": n}).encode() if payload is None else payload
                chunked = headers.get("Transfer-Encoding") == "chunked"
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if not chunked and not isinstance(payload, list):
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    if isinstance(payload, list):  # [(seconds to wait, bytes), ...]
                        for pause, part in payload:
                            time.sleep(pause)
                            self.wfile.write(part)
                            self.wfile.flush()
                    elif chunked:
                        for i in range(0, len(payload), 65536):
                            part = payload[i:i + 65536]
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                        self.wfile.write(b"0\r\n\r\n")
                    else:
                        self.wfile.write(payload)
                except OSError:  # the client read what it keeps and closed
                    self.close_connection = True

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/in"
        self._serving = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._serving.start()

    def close(self) -> None:
        """Stop serving, bounded: socketserver's shutdown() waits for ever when its
        serve_forever is not running (a clean-clone CI run hung 20 minutes in this
        fixture's teardown after test_another_instances_relay_is_woken_by_notify)."""
        if self._serving.is_alive():
            stopping = threading.Thread(target=self.server.shutdown, daemon=True)
            stopping.start()
            stopping.join(10)
            assert not stopping.is_alive(), "the sink did not stop serving within 10 s"
        self.server.server_close()


def create_source(http, token: str, url: str, **extra) -> dict:
    body = {"name": "shop", "provider": "testing", "secrets": [SECRET],
            "destination": {"url": url}, **extra}
    status, answer, _ = http.post("/v1/sources", body, token=token)
    assert status == 201, answer
    return answer["source"]


BODY = json.dumps({"id": "evt_1", "amount": 1250}).encode()


def deliver(gw, source: dict, body: bytes = BODY, event_id="evt_1", **headers):
    path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
    r = gw.client.post(path, data=body, headers={**signed(body, event_id), **headers})
    return r.status_code, r.get_json(silent=True), r.headers


def count(app, table, *where) -> int:
    with app.extensions["keystore"].database.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table).where(*where)).scalar()


HOLDER = "test-relay"


def pump(forwarding, limit=16) -> list:
    """Take what is due and forward it, as one relay round does; the outcomes."""
    out = []
    for job in forwarding.take(HOLDER, limit):
        out.append(forwarding.settle(job, HOLDER, forwarding.forward(job)))
    return [o.value if o else None for o in out]


def delivery(gw, event_id="evt_1"):
    status, body, _ = gw.get("/v1/deliveries", event_id=event_id)
    assert status == 200, body
    return body["deliveries"][0]


def cli(database_url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "KEYSTORE_DATABASE_URL": database_url, "KEYSTORE_SECRET_KEY": KEY}
    return subprocess.run([KEYSTORE, *args], env=env, capture_output=True, text=True,
                          input=stdin, timeout=60)


# Real providers' sources (test_providers_ingest.py, test_event_types.py)
STRIPE_SECRET = "whsec_test_" + "a" * 24
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
STANDARD_SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()


def make(gw, sink, name, provider, **extra):
    """A source of `provider` forwarding to the sink, made through the API; its ingest path."""
    status, body, _ = gw.post("/v1/sources", {"name": name, "provider": provider,
                                              "destination": {"url": sink.url}, **extra})
    assert status == 201, body
    return "/hooks/" + body["source"]["ingest_url"].rsplit("/", 1)[1]


def now_seconds(clock) -> int:
    return clock.now // SECOND


def attempt_all(forwarding, ended: bool = True, holder: str = "pause-relay") -> list:
    """One relay round with its sweep (a paused source's ended events, probes, pauses
    that ended by themselves)."""
    taken, _ = forwarding.take_some(holder, 16, ended=ended)
    return [o.value if o else None for o in (
        forwarding.settle(job, holder, forwarding.attempt(job)) for job in taken)]


def at(micros: int) -> str:
    """RFC 3339 in UTC of a clock's `micros`, as a pause's `until` is written."""
    return datetime.fromtimestamp(micros / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
