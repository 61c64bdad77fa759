"""A destination on loopback that answers a byte at a time, on raw sockets: the status line,
the headers, the body, or a TLS handshake, as an attacker's destination would (issue 25: a
forward with a 2 s timeout held open for over 100 s). It counts the connections open at
once, overall and per event, at the moment each request arrives: a connection the client
closed before it made the next one has its FIN queued by then, so the count is exact."""
from __future__ import annotations

import select
import socket
import threading
import time
from typing import Optional

PAUSE = 0.25  # between two trickled bytes: well inside any per-receive timeout
MOST_SECONDS = 30  # a connection is given up by the sink itself after this long

HEADS = {
    "status": (b"", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),  # all of it slowly
    "headers": (b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a" * 10_000),
    "body": (b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", b"x" * 100_000),
    # a TLS record header (handshake, TLS 1.2, 80 bytes follow), then those bytes slowly
    "tls": (b"\x16\x03\x03\x00\x50", b"\x02" * 80),
    "quick": (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", b""),
    "drop": (b"", b""),  # the request read, then the connection closed: no answer
}


class TricklingSink:
    def __init__(self, mode: str, host: str = "127.0.0.1", port: int = 0):
        self.mode = mode
        self.requests: list[dict] = []
        self.most_open = 0  # connections open at once, at most
        self.twice = []  # events that arrived while a connection of theirs was still open
        self._open: list[tuple[socket.socket, Optional[str]]] = []
        self._lock = threading.Lock()
        self.server = socket.create_server((host, port))
        self.port = self.server.getsockname()[1]
        self.url = f"http://{host}:{self.port}/in"
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        self.server.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        """Requests on one connection, as long as the sink answers them whole (quick)."""
        with conn:
            while self._answer(conn):
                pass

    def _answer(self, conn: socket.socket) -> bool:
        """One request, answered as the mode says; whether the connection goes on."""
        event = None
        if self.mode != "tls":
            head = _request(conn)
            if head is None:
                return False
            event = head.get("idempotency-key")
            with self._lock:
                self.requests.append(head)
                self._open = [(c, e) for c, e in self._open if c is not conn and not _closed(c)]
                if any(e == event for _, e in self._open):
                    self.twice.append(event)
                self._open.append((conn, event))
                self.most_open = max(self.most_open, len(self._open))
        mode = self.mode  # as it is once the request is in
        at_once, slowly = HEADS[mode]
        ended = time.monotonic() + MOST_SECONDS
        try:
            conn.sendall(at_once)
            for byte in slowly:
                if _closed(conn, PAUSE) or time.monotonic() > ended or self._stop.is_set():
                    return False
                conn.sendall(bytes([byte]))
        except OSError:  # the client cut it
            return False
        return mode == "quick"  # answered whole: the connection may carry the next one


def _request(conn: socket.socket) -> Optional[dict]:
    """The request's headers (names in lower case) once its head and body are in."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = conn.recv(65536)
        if not part:
            return None
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (line.partition(":") for line in lines[1:])}
    want = int(headers.get("content-length", 0))
    while len(body) < want:
        part = conn.recv(65536)
        if not part:
            return None
        body += part
    headers["request-line"], headers["head"] = lines[0], head.decode("latin-1")
    return headers


def _closed(conn: socket.socket, wait: float = 0.0) -> bool:
    """The client closed (or cut) the connection; waits up to `wait` s to see it. What the
    client sent meanwhile (a TLS ClientHello) is read and dropped."""
    try:
        ready, _, _ = select.select([conn], [], [], wait)
        return bool(ready) and conn.recv(65536) == b""
    except (OSError, ValueError):  # ValueError: closed here already
        return True
