"""The one effect sink: a tiny local HTTP API that stands for the downstream system whose
side effects must happen once (the invoice API, the mailer, the accounting system). It
counts what it was asked to do.

    POST /effects/<name>   records one effect (JSON body and the Idempotency-Key header) and
                           answers 201 {"id": "<name>-<n>"}; or, while failures are queued
                           for <name>, answers that status without recording anything; or,
                           when `fenced`, answers 409 to a body whose "attempt" is older than
                           one already recorded for <name> (the attempt number is the fencing
                           token a careful downstream system checks).
    GET  /effects/<name>   {"count": n, "items": [{"id", "body", "idempotency_key"}, ...]};
                           query parameters filter on fields of the body (?reference=X).
A name is the path without its leading "/effects/" (or "/"): "/t1/invoices" is "t1/invoices".

It runs in the test process, on a thread, on a free loopback port (`with EffectSink() as s`,
or start() and stop()).
"""
from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional
from urllib.parse import parse_qsl, urlsplit


class EffectSink:
    def __init__(self, fenced: bool = False) -> None:
        self.fenced = fenced
        self.effects: dict[str, list] = defaultdict(list)
        self.failures: dict[str, list[int]] = defaultdict(list)
        self.refused: Counter = Counter()  # effects refused by fencing, by name
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> EffectSink:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> EffectSink:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def record(self, name: str, body: Any = None,
               idempotency_key: Optional[str] = None) -> tuple[int, dict]:
        """One effect asked of `name`, as a POST asks it: its (status, answer)."""
        with self.lock:
            if self.failures[name]:
                return self.failures[name].pop(0), {"error": "try again later"}
            items = self.effects[name]
            attempt = body.get("attempt") if isinstance(body, dict) else None
            if self.fenced and attempt is not None and any(
                    int(attempt) < int(i["body"].get("attempt", 0)) for i in items
                    if isinstance(i["body"], dict)):
                self.refused[name] += 1
                return 409, {"error": "fenced: a newer attempt already acted"}
            ident = f"{name}-{len(items) + 1}"
            items.append({"id": ident, "body": body, "idempotency_key": idempotency_key})
            return 201, {"id": ident}

    def fail_next(self, name: str, times: int, status: int = 503) -> None:
        """The next `times` effects of `name` are refused with `status`, recording nothing."""
        with self.lock:
            self.failures[name].extend([status] * times)

    def count(self, name: str) -> int:
        with self.lock:
            return len(self.effects[name])

    def items(self, name: str) -> list:
        with self.lock:
            return list(self.effects[name])

    def duplicates(self) -> int:
        """Effects beyond the first of each name."""
        with self.lock:
            return sum(len(v) - 1 for v in self.effects.values() if len(v) > 1)

    def wait_for(self, name: str, count: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.count(name) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"sink {name!r}: {self.count(name)} effects, want {count}")
            time.sleep(0.02)


def _handler(sink: EffectSink):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _name(self) -> str:
            path = self.path.split("?", 1)[0].lstrip("/")
            return path[len("effects/"):] if path.startswith("effects/") else path

        def _answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._answer(*sink.record(self._name(), json.loads(raw or b"null"),
                                      self.headers.get("Idempotency-Key")))

        def do_GET(self) -> None:  # noqa: N802
            name = self._name()
            wanted = dict(parse_qsl(urlsplit(self.path).query))
            items = [i for i in sink.items(name) if isinstance(i["body"], dict)
                     and all(str(i["body"].get(k)) == v for k, v in wanted.items())]
            self._answer(200, {"count": len(items), "items": items})

    return Handler
