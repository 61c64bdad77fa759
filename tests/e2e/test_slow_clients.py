"""Slow clients through a real `keystore serve` (issue 25, item 10; contract "Slow clients"):
a thousand connections trickling header bytes do not stop /healthz, /v1 or /hooks, a head
or a body slower than its deadline is closed, and fast clients (keep-alive, a large body)
are served as before. Loopback only, every socket closed at the end, every loop bounded."""
from __future__ import annotations

import http.client
import json
import selectors
import socket
import threading
import time

import pytest
import requests

from keystore_service.storage import migrate
from tests.support import Server, new_token

TRICKLERS = 1000
HEADER_SECONDS = 8  # long enough for the checks below to run while every trickler is open
BODY_SECONDS = 3
ANSWER_SECONDS = 5  # "answers within a few seconds", with a margin for a loaded machine


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('slow')}/keystore.db"
    migrate.upgrade(url)
    log = tmp_path_factory.mktemp("log") / "server.log"
    s = Server(url, workers=2, threads=4, log_path=log, token=new_token(url, "slow"),
               env={"KEYSTORE_HEADER_TIMEOUT_SECONDS": str(HEADER_SECONDS),
                    "KEYSTORE_BODY_TIMEOUT_SECONDS": str(BODY_SECONDS)}).start()
    yield s
    s.stop()


class Tricklers:
    """`n` connections that send a request line and then one header byte a second each."""

    def __init__(self, port: int, n: int):
        self.socks: list[socket.socket] = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            s.setblocking(False)
            self.socks.append(s)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        for _ in range(120):  # at most 2 minutes
            if self.stop.wait(1):
                return
            for s in self.socks:
                try:
                    s.send(b"a")
                except OSError:
                    pass  # closed by the server: what the deadline is for

    def closed_by_server(self, within: float) -> int:
        """How many of the connections the server has closed (EOF or reset) by `within`."""
        sel = selectors.DefaultSelector()
        for s in self.socks:
            sel.register(s, selectors.EVENT_READ)
        closed, deadline = set(), time.monotonic() + within
        while len(closed) < len(self.socks) and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.5):
                try:
                    data = key.fileobj.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    closed.add(key.fileobj)
                    sel.unregister(key.fileobj)
        sel.close()
        return len(closed)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for s in self.socks:
            s.close()


def _timed(call) -> float:
    t0 = time.monotonic()
    call()
    return time.monotonic() - t0


def test_a_thousand_trickling_heads_do_not_stop_healthz_v1_or_hooks(slow_server):
    s = slow_server
    auth = {"Authorization": f"Bearer {s.token}"}
    tricklers = Tricklers(s.port, TRICKLERS)
    opened = time.monotonic()
    try:
        time.sleep(1.5)  # every trickler has sent its first header byte

        def healthz():
            assert requests.get(s.url + "/healthz", timeout=ANSWER_SECONDS).status_code == 200

        def v1():
            r = requests.post(s.url + "/v1/claim", json={"scope": "slow", "key": "k1"},
                              headers=auth, timeout=ANSWER_SECONDS)
            assert r.status_code == 201, r.text

        def hooks():
            r = requests.post(s.url + "/hooks/in_nosuchsource", data=b"{}",
                              timeout=ANSWER_SECONDS)
            assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text
        for call in (healthz, v1, hooks, healthz):
            assert _timed(call) < ANSWER_SECONDS
        assert time.monotonic() - opened < HEADER_SECONDS, "checked while all were open"
        # each is closed at its header deadline (+ the 1 s sweep, + load)
        assert tricklers.closed_by_server(within=HEADER_SECONDS + 6) == TRICKLERS
    finally:
        tricklers.close()
    text = s.log_path.read_text()
    assert "Traceback" not in text and "internal error" not in text
    # one bounded warning, not one line per connection
    assert text.count("KEYSTORE_HEADER_TIMEOUT_SECONDS") <= 3, text[-2000:]


def _trickle_body(port: int, head: str, body: bytes) -> tuple[float, bytes, bool]:
    """Send `head` whole, then `body` a byte every 0.5 s until the server answers or closes:
    (seconds taken, what it answered, whether it closed the connection)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.sendall(head.encode())
        t0, answer, closed = time.monotonic(), b"", False
        c.settimeout(0.5)
        for ch in body[:60]:  # at most ~30 s; the deadline is BODY_SECONDS
            try:
                c.send(bytes([ch]))
                part = c.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                closed = True
                break
            if not part:
                closed = True
                break
            answer += part
        else:
            return time.monotonic() - t0, answer, False
        c.settimeout(5)
        while not closed:  # the rest of the answer, then the end
            try:
                part = c.recv(65536)
            except OSError:
                part = b""
            answer, closed = answer + part, not part
        return time.monotonic() - t0, answer, closed


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_trickled_body_is_cut_at_its_deadline(slow_server, framing):
    s = slow_server
    key = f"k-trickled-{framing}"
    body = json.dumps({"scope": "slow", "key": key, "payload": {"x": "y" * 200}}).encode()
    if framing == "chunked":
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        framing_header = "Transfer-Encoding: chunked"
    else:
        framing_header = f"Content-Length: {len(body)}"
    head = (f"POST /v1/claim HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {s.token}\r\n"
            f"Content-Type: application/json\r\n{framing_header}\r\n\r\n")
    took, answer, closed = _trickle_body(s.port, head, body)
    assert closed and took < BODY_SECONDS + 5, (took, answer)  # + close_graceful's 2 s
    if answer:  # a 400 in the envelope, never a 500
        assert answer.startswith(b"HTTP/1.1 400") and b'"invalid_request"' in answer, answer
    if framing == "chunked":  # read by the app itself (web/api/bodies.py): the setting named
        assert b"KEYSTORE_BODY_TIMEOUT_SECONDS" in answer, answer
    status = requests.get(s.url + "/v1/keys", params={"scope": "slow", "key": key},
                          headers={"Authorization": f"Bearer {s.token}"}, timeout=10)
    assert status.status_code == 404  # nothing was claimed
    text = s.log_path.read_text()
    assert "Traceback" not in text and "internal error" not in text


def test_a_keep_alive_client_and_a_large_fast_body_are_served(slow_server):
    s = slow_server
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    try:
        socks = set()
        for n in range(5):
            conn.request("POST", "/v1/claim", json.dumps({"scope": "ka", "key": f"k{n}"}),
                         {"Authorization": f"Bearer {s.token}",
                          "Content-Type": "application/json"})
            r = conn.getresponse()
            assert r.status == 201, r.read()
            r.read()
            socks.add(id(conn.sock))
            time.sleep(0.3)  # back in the worker's poller between requests
        assert len(socks) == 1  # one connection for all five
    finally:
        conn.close()
    big = {"scope": "ka", "key": "big", "payload": {"blob": "z" * (900 * 1024)}}
    r = requests.post(s.url + "/v1/claim", json=big, timeout=30,
                      headers={"Authorization": f"Bearer {s.token}"})
    assert r.status_code == 201, r.text[:300]


def _exchange(port: int, data: bytes, seconds: float = 5,
              half_close: bool = False) -> tuple[bytes, float]:
    """Send `data` (then end the sending side with `half_close`), read until the server
    closes or `seconds` pass: (answer, time taken)."""
    with socket.create_connection(("127.0.0.1", port), timeout=seconds) as c:
        t0, answer = time.monotonic(), b""
        c.sendall(data)
        if half_close:
            c.shutdown(socket.SHUT_WR)
        while time.monotonic() - t0 < seconds:
            try:
                part = c.recv(65536)
            except OSError:
                break
            if not part:
                break
            answer += part
        return answer, time.monotonic() - t0


@pytest.mark.parametrize("data, status", [
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 3, b"200"),  # pipelined: all three
    (b"GET /" + b"a" * 5000, b"414"),  # too long a line, no end in sight: at once
    (b"GET /healthz HTTP/1.1\r\nX: " + b"b" * (900 * 1024), b"431"),  # past every bound
    (b"GET /healthz HTTP/1.1\nHost: x\n\n", b"400"),  # bare LF
    (b"\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"200"),
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"400"),  # HTTP/2 prior knowledge: not spoken
    (b"POST /v1/claim HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"zz\r\n{}\r\n0\r\n\r\n", b"400"),  # a malformed chunk size, read by the app
    (b"POST /v1/claim HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
     b"Connection: close\r\n\r\n5\r\n{}", b"400"),  # cut short: the client half-closes
])
def test_heads_the_poller_hands_on_are_answered_as_before(slow_server, data, status):
    answer, took = _exchange(slow_server.port, data, seconds=HEADER_SECONDS - 2,
                             half_close=data.endswith(b"{}"))
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:300]
    assert took < HEADER_SECONDS - 2  # answered and closed, or answered at once
    if status == b"200" and data.count(b"GET") == 3:
        assert answer.count(b"HTTP/1.1 200") == 3, answer
    if status != b"200":
        assert b'{"error": {"code"' in answer or b'{"error":{"code"' in answer, answer


def test_a_pipelined_request_behind_a_trickled_head_holds_no_thread(slow_server):
    """A whole request with half of the next behind it: the first is answered, the second
    waits in the poller (not in a thread) and is closed at its deadline."""
    s = slow_server
    socks = []
    try:
        for _ in range(12):  # more than the server's 2 x 4 threads
            c = socket.create_connection(("127.0.0.1", s.port), timeout=5)
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nX: ")
            socks.append(c)
        for c in socks:
            assert c.recv(65536).startswith(b"HTTP/1.1 200")
        assert _timed(lambda: requests.get(s.url + "/healthz", timeout=ANSWER_SECONDS)) < 3
    finally:
        for c in socks:
            c.close()


def test_a_client_gone_mid_head_and_an_idle_one_leave_no_trace(slow_server):
    s = slow_server
    for n in range(50):
        c = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        c.sendall(b"POST /v1/claim HTTP/1.1\r\nHost: x\r\nX-Half: " if n % 2 else b"")
        c.close()
    assert requests.get(s.url + "/healthz", timeout=ANSWER_SECONDS).status_code == 200
    text = s.log_path.read_text()
    assert "Traceback" not in text and "error handling" not in text


def test_a_low_ulimit_means_fewer_connections_not_running_out(tmp_path):
    """With `ulimit -n` 512 (soft and hard), a worker takes fewer connections, says so once,
    and 700 tricklers leave it alive (no EMFILE in accept), answering once they are cut."""
    url = f"sqlite:///{tmp_path}/keystore.db"
    migrate.upgrade(url)
    log = tmp_path / "server.log"
    server = Server(url, workers=1, threads=4, log_path=log, open_files=512,
                    env={"KEYSTORE_HEADER_TIMEOUT_SECONDS": "3"})
    tricklers = None
    try:
        server.start()
        worker = server.worker_pids()
        tricklers = Tricklers(server.port, 700)
        deadline, status = time.monotonic() + 20, None
        while time.monotonic() < deadline and status != 200:
            try:
                status = requests.get(f"{server.url}/healthz", timeout=2).status_code
            except requests.RequestException:
                pass
        assert status == 200
        assert server.worker_pids() == worker  # the same worker, alive
    finally:
        if tricklers:
            tricklers.close()
        server.stop()
    text = log.read_text()
    assert "ulimit -n is 512: this worker holds at most 256 connections" in text, text[-2000:]
    assert "Too many open files" not in text and "Traceback" not in text, text[-2000:]

