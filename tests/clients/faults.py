"""A fault-injecting HTTP proxy in front of the REAL key store, for the client's retry tests.

Every request is forwarded to the service unless a scripted fault for its path is queued:
    answer(path, status, headers, body)  answer instead of the service (it never sees it)
    drop_answer(path)                    forward, let the service apply it, then close the
                                         connection without answering (a lost answer)
`seen[path]` counts the requests that reached the proxy. Only the network conditions are
simulated; every request that is forwarded is decided by the real service.
"""
from __future__ import annotations

import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

import requests

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class FaultProxy:
    def __init__(self, upstream: str, port: int = 0) -> None:
        self.upstream = upstream
        self.faults: dict[str, list] = defaultdict(list)
        self.seen: dict[str, int] = defaultdict(int)
        self.lock = threading.Lock()
        self.port = port
        self.server: Optional[ThreadingHTTPServer] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    def answer(self, path: str, status: int, headers: Optional[dict] = None,
               body: bytes = b"", times: int = 1) -> None:
        with self.lock:
            self.faults[path].extend([("answer", status, headers or {}, body)] * times)

    def drop_answer(self, path: str, times: int = 1) -> None:
        with self.lock:
            self.faults[path].extend([("drop",)] * times)


def _handler(proxy: FaultProxy):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _handle(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0]
            with proxy.lock:
                proxy.seen[path] += 1
                fault = proxy.faults[path].pop(0) if proxy.faults[path] else None
            if fault and fault[0] == "answer":
                _, status, headers, body = fault
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            upstream = requests.request(self.command, proxy.upstream + self.path, data=raw,
                                        headers=headers, timeout=60)
            if fault and fault[0] == "drop":
                self.close_connection = True  # applied upstream; the answer is lost
                return
            self.send_response(upstream.status_code)
            for k, v in upstream.headers.items():
                if k.lower() not in HOP_BY_HOP:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(upstream.content)))
            self.end_headers()
            self.wfile.write(upstream.content)

        do_GET = do_POST = _handle

    return Handler
