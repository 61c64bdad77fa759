"""A small downstream API on 127.0.0.1 for the clients' send tests: the API a connection of
the key store points at. It keeps every request it got (method, path, headers, body) and
answers by script: `script(path, status, body, delay)` queues answers for a path; without
one it answers 201 {"id": "<last path segment>-<n>"} (n counts that path's requests).

    with Downstream() as api:
        api.script("/invoices", 422, {"error": "total must be positive"})
        ... api.requests_to("/invoices")
"""
from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Got:
    method: str
    path: str
    headers: dict  # names in lower case
    body: bytes

    def json(self):
        return json.loads(self.body)


class Downstream:
    def __init__(self) -> None:
        self.got: list[Got] = []
        self.answers: dict[str, deque] = defaultdict(deque)
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Downstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def script(self, path: str, status: int, body=None, delay: float = 0.0,
               times: int = 1) -> None:
        with self.lock:
            self.answers[path].extend([(status, body, delay)] * times)

    def requests_to(self, path: str) -> list[Got]:
        with self.lock:
            return [g for g in self.got if g.path == path]

    def wait_for(self, path: str, count: int, timeout: float = 15.0) -> list[Got]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.requests_to(path)
            if len(got) >= count:
                return got
            time.sleep(0.02)
        raise AssertionError(f"{path} got {len(self.requests_to(path))} requests, not {count}")

    def _answer(self, got: Got) -> tuple[int, object, float]:
        with self.lock:
            self.got.append(got)
            n = sum(1 for g in self.got if g.path == got.path)
            queued = self.answers[got.path]
            if queued:
                return queued.popleft()
        return 201, {"id": f"{got.path.rsplit('/', 1)[-1]}-{n}"}, 0.0


def _handler(api: Downstream):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            got = Got(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                      self.rfile.read(length) if length else b"")
            status, body, delay = api._answer(got)
            if delay:
                time.sleep(delay)
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_POST = do_PUT = do_PATCH = do_DELETE = do_GET = _any

        def log_message(self, *args) -> None:  # quiet
            pass

    return Handler
