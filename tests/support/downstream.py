"""A scripted downstream API on loopback: an invoices API such as a send makes its write to,
with the failure windows of the seeds on demand. It runs in the test process, on threads, on
a free 127.0.0.1 port (`with Downstream() as api`, or start() and close()).

    POST /invoices        creates {"id": "in_<n>", "object": "invoice", **the JSON body}
                          (the body's "reference" is the invoice's reference), 201
    GET  /invoices?reference=R   {"data": [invoices with that reference]} (for checks)
    GET  /invoices/<id>   the invoice, or 404
Any path that ends so is served (a connection's base URL may have a path: /api/invoices).

`Downstream(dedupe_header="Idempotency-Key")` dedupes as Stripe does: a POST with a key
already used is not executed again, its first answer is replayed (same status and body,
`Idempotent-Replayed: true`); while a request with that key is still running, 409; the same
key with another body, 400. Without `dedupe_header` every POST creates.

A request's key is its idempotency header's value (`dedupe_header`, else `Idempotency-Key`)
when it has one, else its body's "reference": requests and creations are counted per key.

Faults are scripted per request number (POSTs and GETs each counted from 1) or per key (a
list, one fault per request of that key, in order), `api.script(fault, n=2)`,
`api.script([stall(3), None], key="acme:k1")` (None: no fault for that request):

    answer(status, create=False)   answer `status` (503, 422, 500, 409...) without creating,
                                   or after creating when `create`
    drop()                         create, then close the connection without answering
                                   (the response lost after the commit)
    stall(seconds)                 create, then wait `seconds` (past the client's timeout)
                                   before answering what nobody reads any more
    hold()                         create, set `api.held`, and answer only on `api.release()`
                                   (a relay killed between the API's answer and its record)
    refuse()                       reset the connection (RST) without answering or creating
                                   anything. The client has sent its request by then: for it,
                                   an outcome it cannot know. A refusal before any byte is
                                   sent is `api.down()`: nothing listens on the port until
                                   `api.up()`.
"""
from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional, Union
from urllib.parse import parse_qsl, urlsplit

HOLD_SECONDS = 60  # a hold nobody releases ends by itself: a failing test must not hang
STOP_SECONDS = 10  # close() gives up (loudly) on a server that does not stop within this


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str  # "answer", "drop", "stall", "hold", "refuse"
    status: int = 0
    create: bool = False
    seconds: float = 0.0


def answer(status: int, create: bool = False) -> Fault:
    return Fault("answer", status=status, create=create)


def drop() -> Fault:
    return Fault("drop", create=True)


def stall(seconds: float) -> Fault:
    return Fault("stall", create=True, seconds=seconds)


def hold() -> Fault:
    return Fault("hold", create=True, seconds=HOLD_SECONDS)


def refuse() -> Fault:
    return Fault("refuse")


@dataclass(slots=True)
class Seen:
    """One request the API got: its number among its method's, what it was, what came of it
    ("created", "replayed", "in_progress", "mismatch", "found", "refused", a status...)."""

    n: int
    method: str
    path: str
    key: Optional[str]
    headers: dict
    body: Any
    outcome: str = ""
    fault: Optional[Fault] = None


@dataclass(slots=True)
class _Kept:  # a key's first answer, for replays
    body: Any
    status: int = 0  # 0 while the first request runs
    answer: dict = field(default_factory=dict)


Script = Union[Fault, None, list]


class Downstream:
    def __init__(self, dedupe_header: Optional[str] = None):
        self.dedupe_header = dedupe_header
        self.key_header = dedupe_header or "Idempotency-Key"
        self.invoices: list[dict] = []
        self.seen: list[Seen] = []
        self.held = threading.Event()  # a hold() fault has created its invoice
        self._release = threading.Event()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._numbers: Counter = Counter()  # requests so far, per method
        self._by_number: dict[tuple[str, int], Fault] = {}
        self._by_key: dict[tuple[str, str], list] = {}
        self._kept: dict[str, _Kept] = {}
        self._serving: Optional[threading.Thread] = None
        self.server = self._server(0)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    # lifecycle
    def _server(self, port: int) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        server.daemon_threads = True
        return server

    def start(self) -> Downstream:
        self._serving = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                         daemon=True)  # polled often: close() is quick
        self._serving.start()
        return self

    def close(self) -> None:
        """Stop serving, bounded (socketserver's shutdown() waits for ever when serve_forever
        is not running), and wake every stalled or held request."""
        self._closing.set()
        self._release.set()
        self._stop_serving()

    def _stop_serving(self) -> None:
        if self._serving is not None and self._serving.is_alive():
            stopping = threading.Thread(target=self.server.shutdown, daemon=True)
            stopping.start()
            stopping.join(STOP_SECONDS)
            assert not stopping.is_alive(), "the downstream API did not stop within 10 s"
        self._serving = None
        self.server.server_close()

    def down(self) -> None:
        """Nothing listens on the port: a connection is refused before any byte is sent."""
        self._stop_serving()

    def up(self) -> None:
        """Listen on the same port again (after down())."""
        self.server = self._server(self.port)
        self.start()

    def __enter__(self) -> Downstream:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # the script
    def script(self, fault: Script, n: Optional[int] = None, key: Optional[str] = None,
               method: str = "POST") -> None:
        """`fault` for the n-th request of `method` (from 1), or the list of faults for the
        next requests of `method` carrying `key`, one each (None: none for that one)."""
        with self._lock:
            if n is not None:
                assert isinstance(fault, Fault), "one fault per request number"
                self._by_number[(method, n)] = fault
            else:
                assert key is not None, "script() takes n or key"
                faults = fault if isinstance(fault, list) else [fault]
                self._by_key.setdefault((method, key), []).extend(faults)

    def release(self) -> None:
        """Let every held request answer."""
        self._release.set()

    # what happened
    def created(self, key: Optional[str] = None) -> int:
        """Invoices created (of `key`)."""
        with self._lock:
            return sum(1 for i in self.invoices if key is None or i["_key"] == key)

    def requests(self, key: Optional[str] = None, method: str = "POST") -> int:
        """Requests of `method` the API got (carrying `key`)."""
        with self._lock:
            return sum(1 for s in self.seen
                       if s.method == method and (key is None or s.key == key))

    def requests_seen(self, key: Optional[str] = None, method: str = "POST") -> list[Seen]:
        with self._lock:
            return [s for s in self.seen
                    if s.method == method and (key is None or s.key == key)]

    def keys(self) -> Counter:
        """Invoices created per key: a key with more than one is a duplicate effect."""
        with self._lock:
            return Counter(i["_key"] for i in self.invoices)

    def shown(self, reference: Optional[str] = None) -> list[dict]:
        """The invoices as the API shows them (with `reference`)."""
        with self._lock:
            return [_public(i) for i in self.invoices
                    if reference is None or i.get("reference") == reference]

    def wait_for(self, created: int = 1, requests: int = 0, timeout: float = 30) -> None:
        """Until at least `created` invoices and `requests` POSTs; AssertionError at `timeout`."""
        deadline = time.monotonic() + timeout
        while self.created() < created or self.requests() < requests:
            if time.monotonic() > deadline:
                raise AssertionError(f"downstream: {self.created()} invoices, "
                                     f"{self.requests()} requests; want {created}, {requests}")
            time.sleep(0.02)

    # the requests (the handler's threads)
    def _arrive(self, method: str, path: str, headers: dict, body: Any) -> Seen:
        key = headers.get(self.key_header.lower())
        if key is None and isinstance(body, dict) and isinstance(body.get("reference"), str):
            key = body["reference"]
        with self._lock:
            self._numbers[method] += 1
            n = self._numbers[method]
            fault = self._by_number.pop((method, n), None)
            queued = self._by_key.get((method, key)) if key is not None else None
            if fault is None and queued:
                fault = queued.pop(0)
            seen = Seen(n, method, path, key, headers, body, fault=fault)
            self.seen.append(seen)
            return seen

    def _create(self, seen: Seen) -> tuple[int, dict, dict]:
        """(status, answer, extra headers) of a POST, creating the invoice unless it replays."""
        body = seen.body if isinstance(seen.body, dict) else {}
        dedupe = self.dedupe_header is not None and seen.key is not None
        with self._lock:
            kept = self._kept.get(seen.key) if dedupe else None
            if kept is not None:
                if kept.body != seen.body:
                    seen.outcome = "mismatch"
                    return 400, _error("idempotency_error", "key reused with another body"), {}
                if kept.status == 0:
                    seen.outcome = "in_progress"
                    return 409, _error("idempotency_error", "a request with this key runs"), {}
                seen.outcome = "replayed"
                return kept.status, kept.answer, {"Idempotent-Replayed": "true"}
            invoice = {**body, "id": f"in_{len(self.invoices) + 1}", "object": "invoice",
                       "_key": seen.key, "_n": seen.n}
            self.invoices.append(invoice)
            if dedupe:  # answered (kept) when the request ends, in_progress until then
                self._kept[seen.key] = _Kept(seen.body)
            seen.outcome = "created"
            return 201, _public(invoice), {}

    def _done(self, seen: Seen, status: int, answer: dict) -> None:
        with self._lock:
            kept = self._kept.get(seen.key) if seen.key is not None else None
            if kept is not None and kept.status == 0 and seen.outcome == "created":
                kept.status, kept.answer = status, answer

    def _wait(self, fault: Fault) -> None:
        if fault.kind == "hold":
            self.held.set()
            self._release.wait(fault.seconds)
        else:
            self._closing.wait(fault.seconds)

    def _lookup(self, path: str, query: str) -> tuple[int, dict]:
        found = re.search(r"/invoices/([^/]+)$", path)
        if found:
            got = [i for i in self.shown() if i["id"] == found.group(1)]
            return (200, got[0]) if got else (404, _error("not_found", "no such invoice"))
        wanted = dict(parse_qsl(query))
        return 200, {"data": [i for i in self.shown() if all(
            str(i.get(k)) == v for k, v in wanted.items())]}


def _public(invoice: dict) -> dict:
    return {k: v for k, v in invoice.items() if not k.startswith("_")}


def _error(code: str, message: str) -> dict:
    return {"error": {"type": code, "message": message}}


def _handler(api: Downstream):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # kept-alive connections, as real APIs

        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, status: int, body: dict, headers: Optional[dict] = None) -> None:
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
            except OSError:  # the client is gone (it timed out, or was killed)
                self.close_connection = True

        def _reset(self) -> None:
            """Close at once with a reset (SO_LINGER 0), whatever is left unread."""
            self.close_connection = True
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
            except OSError:
                pass

        def _drop(self) -> None:
            """Close without a byte of answer: the client sees its connection end."""
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def _route(self) -> bool:
            if re.search(r"/invoices(/[^/]+)?$", urlsplit(self.path).path):
                return True
            self._send(404, _error("not_found", "no such route"))
            return False

        def _headers(self) -> dict:
            return {k.lower(): v for k, v in self.headers.items()}

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            if not self._route():
                return
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = None
            seen = api._arrive("POST", self.path, self._headers(), body)
            fault = seen.fault
            if fault is not None and fault.kind == "refuse":
                seen.outcome = "refused"
                return self._reset()
            if fault is not None and fault.kind == "answer" and not fault.create:
                seen.outcome = str(fault.status)
                return self._send(fault.status, _error("scripted", f"status {fault.status}"))
            status, answer, headers = api._create(seen)
            if fault is None or seen.outcome != "created":
                api._done(seen, status, answer)
                return self._send(status, answer, headers)
            self._after_create(seen, fault, status, answer)

        def _after_create(self, seen: Seen, fault: Fault, status: int, answer: dict) -> None:
            """A created invoice's scripted end. A replay gives what the first request's
            client was given (Stripe keeps a 500 too); a dropped one, the invoice."""
            if fault.kind == "answer":
                scripted = _error("scripted", f"status {fault.status}")
                api._done(seen, fault.status, scripted)
                return self._send(fault.status, scripted)
            if fault.kind == "drop":
                api._done(seen, status, answer)
                return self._drop()
            api._wait(fault)  # stall or hold: a retry meanwhile is in_progress (409)
            api._done(seen, status, answer)
            self._send(status, answer)

        def do_GET(self) -> None:  # noqa: N802
            if not self._route():
                return
            split = urlsplit(self.path)
            reference = dict(parse_qsl(split.query)).get("reference")
            seen = api._arrive("GET", self.path, self._headers(),
                               None if reference is None else {"reference": reference})
            fault = seen.fault
            if fault is not None and fault.kind == "refuse":
                seen.outcome = "refused"
                return self._reset()
            if fault is not None and fault.kind == "answer":
                seen.outcome = str(fault.status)
                return self._send(fault.status, _error("scripted", f"status {fault.status}"))
            if fault is not None:  # stall or hold a check: it answers late
                api._wait(fault)
            status, answer = api._lookup(split.path, split.query)
            seen.outcome = "found" if status == 200 else str(status)
            self._send(status, answer)

    return Handler
