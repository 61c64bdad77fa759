"""Run a command with its output passed through live and its last bytes kept for the record.

The command runs in a process group of its own. Signals that would stop keystore-client
(SIGTERM, SIGINT, SIGHUP) are forwarded to that whole group instead (`sh -c 'a; b'` and what it
started), so the command decides how to stop and keystore-client still learns how it ended (a
command killed by a signal has an unknown outcome: its key is left to the lease).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Optional

MAX_KEPT = 64 * 1024  # bytes of each stream kept for replays: the last ones, where errors are
LINGER_SECONDS = 5.0  # after the command exits, how long to read output that a process it
# left behind still writes; then that process is on its own and its output is not recorded
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@dataclass(frozen=True)
class Finished:
    returncode: int  # as subprocess reports it: -N when killed by signal N
    stdout: bytes
    stderr: bytes
    truncated: bool


class _Tail:
    def __init__(self) -> None:
        self.data = bytearray()
        self.truncated = False
        self.lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self.lock:
            self.data += chunk
            if len(self.data) > MAX_KEPT:
                del self.data[:len(self.data) - MAX_KEPT]
                self.truncated = True

    def snapshot(self) -> bytes:
        with self.lock:
            return bytes(self.data)


def run_command(argv: Sequence[str]) -> Finished:
    """Run `argv` (no shell). Raises OSError when it cannot be started."""
    group = _Group()
    previous = _forward_signals(group)  # before the start: no signal may slip through
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        group.started(proc.pid)
        tails = (_Tail(), _Tail())
        pumps = [threading.Thread(target=_pump, args=(pipe, sink, tail), daemon=True)
                 for pipe, sink, tail in ((proc.stdout, sys.stdout, tails[0]),
                                          (proc.stderr, sys.stderr, tails[1]))]
        for t in pumps:
            t.start()
        returncode = proc.wait()
        for t in pumps:
            t.join(LINGER_SECONDS)
    finally:
        _restore(previous)
    return Finished(returncode, tails[0].snapshot(), tails[1].snapshot(),
                    tails[0].truncated or tails[1].truncated)


def _pump(pipe: Optional[IO[bytes]], sink: IO[str], tail: _Tail) -> None:
    assert pipe is not None
    out = getattr(sink, "buffer", None)
    fd = pipe.fileno()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        tail.add(chunk)
        try:
            if out is not None:
                out.write(chunk)
                out.flush()
            else:
                sink.write(chunk.decode("utf-8", "replace"))
                sink.flush()
        except (OSError, ValueError):
            pass  # our own output is gone (a closed pipe): keep collecting for the record
    pipe.close()


class _Group:
    """The command's process group; a signal that arrives before it exists waits for it."""

    def __init__(self) -> None:
        self.pid: Optional[int] = None
        self.pending: list = []

    def started(self, pid: int) -> None:
        self.pid = pid
        for signum in self.pending:
            self.signal(signum)

    def signal(self, signum: int, _frame: object = None) -> None:
        if self.pid is None:
            self.pending.append(signum)
            return
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            pass  # the group is gone already


def _forward_signals(group: _Group) -> dict:
    if threading.current_thread() is not threading.main_thread():
        return {}  # only the main thread may set handlers
    return {s: signal.signal(s, group.signal) for s in FORWARDED}


def _restore(previous: dict) -> None:
    for s, handler in previous.items():
        signal.signal(s, handler)
