"""A workflow behind the gateway, as a real HTTP server on loopback: it checks the gateway's
Standard Webhooks signature, acts once per `Idempotency-Key` (what the Guard node does) and
keeps a log of every forward that reached it, so a test can count effects, repeats and the
forwards docs/webhooks/README.md does not allow. Its mode is set by the test:

    ok      acts (first time per key), then answers 200 after `work()` seconds
    down    its listening socket is closed: the relay's connection is refused
    500     answers 500 without acting
    429     answers 429 with Retry-After: 1 without acting
    slow    acts, then sleeps past the source's timeout before its 200 (an unknown outcome)
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

from standardwebhooks import Webhook, WebhookVerificationError

MODES = ("ok", "down", "500", "429", "slow")


@dataclass
class Forward:
    """One forward that reached the sink."""

    key: str
    attempt: int
    at: float  # monotonic, on arrival
    mode: str
    acted: bool  # this request made the key's effect (its first acting forward)
    status: int
    answered_at: Optional[float] = None  # when its answer was written back (None: the
    # relay had gone, after its timeout or killed; written is not yet read, though)


class GuardedSink:
    def __init__(self, secret: str, timeout_seconds: float,
                 work: Callable[[], float] = lambda: 0.0):
        self.webhook = Webhook(secret)
        self.slow_seconds = timeout_seconds + 0.7  # past the relay's read timeout, surely
        self.work = work
        self.mode = "ok"
        self.effects: Counter = Counter()  # key -> effects made (the guard keeps it at 1)
        self.unguarded: Counter = Counter()  # key -> forwards that a workflow without a
        # guard would have acted on (ok and slow modes): its double effects are the repeats
        self.log: list[Forward] = []
        self.bad_signatures = 0
        self.in_flight: dict[int, str] = {}  # the relay's client port -> the key it forwards
        self.gate = threading.Event()  # cleared: acting forwards wait for it before answering
        self.gate.set()
        self._lock = threading.Lock()
        self._server: Optional[ThreadingHTTPServer] = None
        self._port = 0
        self._listen()
        self.port = self._port
        self.url = f"http://127.0.0.1:{self.port}/workflow"

    # --- modes ----------------------------------------------------------------------------

    def set_mode(self, mode: str) -> None:
        assert mode in MODES, mode
        if mode == "down" and self._server is not None:
            self._close()
        elif mode != "down" and self._server is None:
            self._listen()
        self.mode = mode

    def run_phases(self, phases: list[tuple[str, float]]) -> threading.Thread:
        """Walk through (mode, seconds) in a thread, then stay "ok"."""
        def walk() -> None:
            for mode, seconds in phases:
                self.set_mode(mode)
                time.sleep(seconds)
            self.set_mode("ok")
        thread = threading.Thread(target=walk, name="sink-phases", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        if self._server is not None:
            self._close()

    # --- what happened --------------------------------------------------------------------

    def repeats(self) -> int:
        """Forwards that reached the sink in an acting mode for a key already acted on."""
        return sum(n - 1 for n in self.unguarded.values() if n > 1)

    def forwards_by_mode(self) -> dict[str, int]:
        return dict(Counter(f.mode for f in self.log))

    def after_prompt_2xx(self) -> list[tuple[Forward, Forward]]:
        """(earlier, later) pairs: a forward of a key that arrived after the sink had
        promptly answered 200 to an earlier forward of it. The relay was told it was
        delivered, so the later one is a forward docs/webhooks/README.md forbids unless the relay
        that was told died (or lost its database) before it wrote the attempt down: a test
        checks that against the stored attempts."""
        with self._lock:
            log = list(self.log)
        prompt = {}
        for f in sorted(log, key=lambda f: f.answered_at or 0):
            if f.mode == "ok" and f.status == 200 and f.answered_at is not None:
                prompt.setdefault(f.key, f)
        return [(prompt[f.key], f) for f in log
                if f.key in prompt and f.at > prompt[f.key].answered_at]

    # --- the server -----------------------------------------------------------------------

    def _act(self, key: str) -> bool:
        with self._lock:
            self.unguarded[key] += 1
            if self.effects[key]:
                return False
            self.effects[key] += 1  # the guard: once per Idempotency-Key, atomically
            return True

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        key = handler.headers.get("Idempotency-Key", "")
        attempt = int(handler.headers.get("Keystore-Attempt") or 0)
        port = handler.client_address[1]
        mode, arrived = self.mode, time.monotonic()
        try:
            self.webhook.verify(body, {k.lower(): v for k, v in handler.headers.items()})
        except WebhookVerificationError:
            with self._lock:
                self.bad_signatures += 1
            mode = "bad_signature"
        with self._lock:
            self.in_flight[port] = key
        headers = {}
        acted = False
        try:
            if mode == "500":
                status = 500
            elif mode == "429":
                status, headers = 429, {"Retry-After": "1"}
            elif mode == "bad_signature":
                status = 401
            else:
                acted = self._act(key)
                self.gate.wait(60)
                time.sleep(self.slow_seconds if mode == "slow" else self.work())
                status = 200
            forward = Forward(key, attempt, arrived, mode, acted, status)
            with self._lock:
                self.log.append(forward)
            payload = b'{"ok":true}'
            try:
                handler.send_response(status)
                for name, value in headers.items():
                    handler.send_header(name, value)
                handler.send_header("Content-Length", str(len(payload)))
                handler.end_headers()
                handler.wfile.write(payload)
                handler.wfile.flush()
                forward.answered_at = time.monotonic()
            except OSError:
                pass  # the relay went away (its timeout, or it was killed)
        finally:
            with self._lock:
                self.in_flight.pop(port, None)

    def _listen(self) -> None:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                sink._handle(self)

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            # socketserver's backlog of 5 drops the SYNs of a burst of forwards, and the
            # relay's 1 s connect timeout then counts them as timeouts that never arrived
            request_queue_size = 256

        server = Server(("127.0.0.1", self._port), Handler)  # the same port after "down"
        self._port = server.server_address[1]
        threading.Thread(target=server.serve_forever, name="sink", daemon=True).start()
        self._server = server

    def _close(self) -> None:
        server, self._server = self._server, None
        server.shutdown()
        server.server_close()
