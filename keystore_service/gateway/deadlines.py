"""One deadline for a whole outbound request, enforced at the socket.

A socket's timeout bounds each receive, so a destination that sends a byte now and then
holds a request for as long as it likes (issue 25: a forward with a 2 s timeout open for
over 100 s, past its lease). Here each request runs inside `Deadlines.bound(deadline)`;
every socket it opens or reuses is watched (outbound.py's connection classes call watch()),
and one reaper thread per process shuts the watched sockets down when their deadline
passes: the blocked receive, send or TLS handshake returns at once, whatever phase the
request is in. `Bound.cut` then says the request ran out of time, whatever error or short
answer the shutdown made the client report.

A watched socket is kept as a duplicate of its file descriptor, closed when the request
ends: the reaper can never shut down a descriptor that was closed and reused meanwhile.
No thread per request: registering costs a dict insert and a dup().
"""
from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Optional


class Bound:
    """One request's deadline (time.monotonic()) and the sockets watched for it."""

    __slots__ = ("deadline", "fds", "cut")

    def __init__(self, deadline: float):
        self.deadline = deadline
        self.fds: list[int] = []  # duplicates of the watched sockets' descriptors
        self.cut = False  # the reaper shut a socket of this request down

    def left(self) -> float:
        return self.deadline - time.monotonic()


class Deadlines:
    def __init__(self) -> None:
        self._local = threading.local()
        self._cond = threading.Condition()
        self._watched: dict[int, Bound] = {}  # a duplicate descriptor: its request
        self._next = float("inf")  # the deadline the reaper sleeps until
        self._thread: Optional[threading.Thread] = None

    @contextmanager
    def bound(self, deadline: float) -> Iterator[Bound]:
        """Run a request under `deadline`: sockets watched meanwhile are shut down at it."""
        bound = self._local.bound = Bound(deadline)
        try:
            yield bound
        finally:
            self._local.bound = None
            with self._cond:
                for fd in bound.fds:
                    self._watched.pop(fd, None)
            for fd in bound.fds:
                os.close(fd)

    def current(self) -> Optional[Bound]:
        """This thread's request, if it runs inside bound()."""
        return getattr(self._local, "bound", None)

    def watch(self, sock: socket.socket) -> Optional[Bound]:
        """Watch `sock` for this thread's request (nothing outside bound()); the request."""
        bound = self.current()
        if bound is None:
            return None
        fd = os.dup(sock.fileno())
        bound.fds.append(fd)
        with self._cond:
            if bound.deadline <= time.monotonic():
                bound.cut = True
                _shut(fd)
                return bound
            self._watched[fd] = bound
            if self._thread is None:
                self._thread = threading.Thread(target=self._reap, name="keystore-deadlines",
                                                daemon=True)
                self._thread.start()
            if bound.deadline < self._next:
                self._next = bound.deadline
                self._cond.notify()
        return bound

    def _reap(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                if now < self._next:
                    self._cond.wait(None if self._next == float("inf") else self._next - now)
                    continue
                for fd, bound in list(self._watched.items()):
                    if bound.deadline <= now:
                        bound.cut = True
                        _shut(fd)
                        del self._watched[fd]  # its request closes the duplicate
                self._next = min((b.deadline for b in self._watched.values()),
                                 default=float("inf"))


def _shut(fd: int) -> None:
    """Shut the socket behind `fd` down for both directions, leaving `fd` open."""
    sock = socket.socket(fileno=fd)
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed by the peer, or never connected
        pass
    finally:
        sock.detach()
