"""Deadlines for slow clients in gunicorn's gthread worker (issue 25, item 10; docs/api.md's
"Slow clients").

gthread hands a connection to a worker thread as soon as its first byte arrives, and the
thread then reads the rest of the request blocking: connections that sent a request line and
then one header byte a second took every thread after 80-240 of them. Here the worker's main
loop (its poller, which waits on all its connections at once) reads each request head itself,
without blocking, into a buffer of the connection's own, and hands the connection to a thread
only once the head is complete; the thread's parser reads that buffer first. So:

- a head (request line and headers) must arrive within `header_timeout` seconds of its first
  byte (of the connection, for a new one); slower connections are closed, and one warning a
  minute at most says how many were;
- the body must then arrive within `body_timeout` seconds: every read of it is bounded by
  what is left, and past it the read fails (the app answers 400, the connection closes);
- a malformed or cut chunked body is a 400 too, never an internal error (`GuardedBody`);
- how many connections a worker holds, pending heads included, is gunicorn's
  `worker_connections` (server.WORKER_CONNECTIONS): past it the worker stops accepting, so
  file descriptors cannot run out.

With TLS or HTTP/2 cleartext configured in gunicorn itself, the worker keeps gthread's own
behaviour (the TLS proxy in front is then the protection, docs/deployment.md).
"""
from __future__ import annotations

import resource
import selectors
import socket
import time
from collections import OrderedDict
from functools import partial
from typing import Any

from gunicorn.http import errors as http_errors
from gunicorn.workers.gthread import ThreadWorker
from werkzeug.exceptions import BadRequest

# One recv per readiness of a pending head: a head fits in a few (gunicorn's own read size is
# 8 KiB; 64 KiB keeps a large head to a handful of wake-ups).
HEAD_READ = 64 * 1024
# A warning about closed slow connections at most this often per worker: bounded, whatever
# their number.
WARN_EVERY_SECONDS = 60.0


# A worker's own file descriptors beside its connections: the database pool (at most 200,
# KEYSTORE_POOL_SIZE), the relay's forwards, pipes, log files and the listening sockets.
FD_RESERVE = 256


class BodyLate(TimeoutError):
    """A read of the request body after its deadline."""


class BodyRefused(BadRequest, TimeoutError):
    """A body cut at its deadline, or malformed: 400 in the app. A TimeoutError (so an
    OSError) too, so that readers that take a failed read for the client's (werkzeug's
    LimitedStream, the drain in web/api/bodies.py, gunicorn's drain before a keep-alive) do so,
    instead of letting it become an internal error."""


_BODY_ERRORS = (BodyLate, http_errors.NoMoreData, http_errors.ChunkMissingTerminator,
                http_errors.InvalidChunkSize, http_errors.InvalidHeader,
                http_errors.LimitRequestHeaders) + tuple(
    getattr(http_errors, name) for name in ("InvalidChunkExtension",)
    if hasattr(http_errors, name))


class Clocked:
    """A connection's socket as the request parser reads it: each recv bounded by `deadline`
    (monotonic; None: unbounded). Past it a head read ends as if the client had closed (the
    parser then stops quietly) and a body read raises BodyLate. Anything else is the socket's
    own (gettimeout, settimeout... for gunicorn's drain of an unread body)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.deadline: float | None = None
        self.in_body = False

    def recv(self, size: int) -> bytes:
        if self.deadline is None:
            return self.sock.recv(size)
        outer = self.sock.gettimeout()  # a caller's own bound (a drain) stays in force
        left = self.deadline - time.monotonic()
        if left <= 0:
            return self._late()
        self.sock.settimeout(left if outer is None else min(left, outer))
        try:
            return self.sock.recv(size)
        except socket.timeout:
            if time.monotonic() < self.deadline:
                raise  # the caller's shorter bound, not ours
            return self._late()
        finally:
            self.sock.settimeout(outer)

    def _late(self) -> bytes:
        if self.in_body:
            raise BodyLate("the request body did not arrive in time")
        return b""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


class GuardedBody:
    """The request body as the app reads it (wsgi.input): gunicorn's errors of a cut or
    malformed body, and its deadline, become BodyRefused (400) instead of an internal error.
    `failed` tells gunicorn not to reuse the connection."""

    def __init__(self, body: Any, body_timeout: float):
        self._body, self._timeout, self._failed = body, body_timeout, False

    @property
    def failed(self) -> bool:
        return self._failed or getattr(self._body, "failed", False) is True

    def _call(self, name: str, *args: Any) -> Any:
        if self._failed:
            raise BodyRefused("the request body was already refused")
        try:
            return getattr(self._body, name)(*args)
        except _BODY_ERRORS as exc:
            self._failed = True
            if isinstance(exc, BodyLate):
                raise BodyRefused(f"the request body did not arrive within {self._timeout:g} s "
                                  "(KEYSTORE_BODY_TIMEOUT_SECONDS)") from None
            raise BodyRefused("the request body is cut short or not valid HTTP") from None

    def read(self, size: Any = None) -> bytes:
        return self._call("read", size)

    def readline(self, size: Any = None) -> bytes:
        return self._call("readline", size)

    def readlines(self, size: Any = None) -> list:
        return self._call("readlines", size)

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line


def head_complete(buf: bytearray, cap: int, line_limit: int) -> bool:
    """Whether the parser can take the head now without waiting: it is complete (a blank
    line), or it holds a bare LF (refused at once, 400), or its request line is already
    longer than the limit (414), or it is past what the parser would ever buffer (431)."""
    return (b"\r\n\r\n" in buf or len(buf) > cap
            or buf.count(b"\n") != buf.count(b"\r\n")
            or (len(buf) > line_limit + 4 and b"\r\n" not in buf[2:line_limit + 4]))


class DeadlineWorker(ThreadWorker):
    """gthread with the deadlines above; subclasses set `header_timeout`, `body_timeout`."""

    header_timeout = 10.0
    body_timeout = 30.0

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.heads: OrderedDict[Any, float] = OrderedDict()  # conn -> deadline, oldest first
        self.slow_closed, self.warned_at = 0, time.monotonic() - WARN_EVERY_SECONDS
        cfg = self.cfg
        self.deadlines_on = not cfg.is_ssl and getattr(cfg, "http2_cleartext", "off") in (
            "off", None, False)
        # what gunicorn's parser buffers at most for a head: the request line and the fields
        self.line_limit = max(cfg.limit_request_line, 0) or 8190
        self.head_cap = self.line_limit + 2 + (
            max(cfg.limit_request_fields, 0) or 100) * (
            (max(cfg.limit_request_field_size, 0) or 8190) + 2) + 4

    def init_process(self) -> None:
        """After the fork: room in this process's descriptor limit (`ulimit -n`, per process)
        for worker_connections and the worker's own; the soft limit is raised towards the hard
        one if it must be, else fewer connections are taken, said once."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        need = self.worker_connections + FD_RESERVE
        if soft != resource.RLIM_INFINITY and soft < need:
            target = need if hard == resource.RLIM_INFINITY else min(need, hard)
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                soft = target
            except (ValueError, OSError):
                pass
            if soft < need:
                self.worker_connections = max(soft - FD_RESERVE, self.cfg.threads + 1)
                self.max_keepalived = self.worker_connections - self.cfg.threads
                self.log.warning("ulimit -n is %d: this worker holds at most %d connections "
                                 "(raise the limit for worker_connections %d)", soft,
                                 self.worker_connections, self.cfg.worker_connections)
        super().init_process()

    def enqueue_req(self, conn: Any) -> None:
        """Every way into the thread pool (a new connection, a kept-alive one readable again,
        a request pipelined behind the last) goes through the head's buffer first."""
        if not self.deadlines_on:
            return super().enqueue_req(conn)
        buffered = conn.parser.unreader.take_buffered() if conn.parser else b""
        conn.head = bytearray(buffered)
        conn.head_deadline = time.monotonic() + self.header_timeout
        if head_complete(conn.head, self.head_cap, self.line_limit):
            return self._dispatch(conn)
        conn.sock.setblocking(False)
        self.heads[conn] = conn.head_deadline
        self.poller.register(conn.sock, selectors.EVENT_READ,
                             partial(self._on_head_readable, conn))
        self._on_head_readable(conn, None)  # a kept-alive connection has its bytes waiting

    def _on_head_readable(self, conn: Any, _sock: Any) -> None:
        try:
            data = conn.sock.recv(HEAD_READ)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client closed (or reset) before its head was complete
            self._forget(conn)
            return
        conn.head += data
        if head_complete(conn.head, self.head_cap, self.line_limit):
            self._unwatch(conn)
            self._dispatch(conn)

    def _dispatch(self, conn: Any) -> None:
        ThreadWorker.enqueue_req(self, conn)  # to a thread, head complete

    def _unwatch(self, conn: Any) -> None:
        self.heads.pop(conn, None)
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass

    def _forget(self, conn: Any) -> None:
        self._unwatch(conn)
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        """gthread's sweep (once a second from its main loop), and heads past their deadline
        closed, with at most one warning a minute."""
        super().murder_pending()
        now = time.monotonic()
        while self.heads:
            conn, deadline = next(iter(self.heads.items()))
            if deadline > now:
                break
            self._forget(conn)
            self.slow_closed += 1
        if self.slow_closed and now - self.warned_at >= WARN_EVERY_SECONDS:
            self.log.warning("closed %d connections whose request head did not arrive within "
                             "%g s (KEYSTORE_HEADER_TIMEOUT_SECONDS)", self.slow_closed,
                             self.header_timeout)
            self.slow_closed, self.warned_at = 0, now

    def murder_keepalived(self, force: bool = False) -> None:
        super().murder_keepalived(force)
        while force and self.heads:  # the worker stops: pending heads go with it
            self._forget(next(iter(self.heads)))

    def handle(self, conn: Any) -> Any:
        """In a worker thread: the buffered head goes back in front of the parser, whose
        reads of the socket are then bounded by what is left of the head's deadline."""
        if self.deadlines_on and hasattr(conn, "head"):
            try:
                conn.sock.setblocking(True)
                conn.init()
            except OSError:  # the client is gone already: the connection closes
                return False
            unreader = conn.parser.unreader
            if not isinstance(unreader.sock, Clocked):
                unreader.sock = Clocked(unreader.sock)
            unreader.sock.in_body = False
            unreader.sock.deadline = conn.head_deadline
            unreader.unread(bytes(conn.head))
            del conn.head
        return super().handle(conn)

    def handle_request(self, req: Any, conn: Any) -> Any:
        """The head is parsed: the body's deadline starts, and its errors become 400s."""
        clock = getattr(conn.parser.unreader, "sock", None) if conn.parser else None
        if isinstance(clock, Clocked):
            clock.in_body = True
            clock.deadline = time.monotonic() + self.body_timeout
        if req.body is not None:
            req.body = GuardedBody(req.body, self.body_timeout)
        return super().handle_request(req, conn)
