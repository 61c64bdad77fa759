"""A downstream API's check endpoint on loopback for the settlement tests (issue 28): it
answers each GET as the test says, and notes every request."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

INVOICE = {"id": "in_42", "object": "invoice", "status": "paid"}
CHECK = {"method": "GET", "path": "/invoices?reference={reference}",
         "found": {"pointer": "/data/0"}, "resource_id": "/data/0/id", "absent": "/data"}


class CheckServer:
    """A downstream API's GET on loopback: `answer(path)` gives (status, body, seconds to
    wait before answering); every request is noted (path, headers)."""

    def __init__(self):
        self.answer = lambda path: (200, json.dumps({"data": [INVOICE]}).encode(), 0)
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's API)
                server.requests.append({"path": self.path, "headers": dict(self.headers)})
                status, body, wait = server.answer(self.path)
                time.sleep(wait)
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up first
                    pass

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.http.server_address[1]}/api/"
        self._thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self._thread.start()

    def close(self):
        self.http.shutdown()
        self.http.server_close()


def answering(api: CheckServer, status: int, body, wait: float = 0.0) -> None:
    """Every GET answered `status` with `body` (bytes, or JSON) after `wait` seconds."""
    api.answer = lambda path: (status, body if isinstance(body, bytes)
                               else json.dumps(body).encode(), wait)
