"""Run a command with its output passed through live and its last bytes kept for the record.

Signals that would stop keystore-client (SIGTERM, SIGINT, SIGHUP) are forwarded to the
command instead, so the command decides how to stop and keystore-client still learns how it
ended (a command killed by a signal has an unknown outcome: its key is left to the lease).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import IO, Optional, Sequence

MAX_KEPT = 64 * 1024  # bytes of each stream kept for replays: the last ones, where errors are
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

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > MAX_KEPT:
            del self.data[:len(self.data) - MAX_KEPT]
            self.truncated = True


def run_command(argv: Sequence[str]) -> Finished:
    """Run `argv` (no shell). Raises OSError when it cannot be started."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    previous = _forward_signals(proc)
    try:
        tails = (_Tail(), _Tail())
        pumps = [threading.Thread(target=_pump, args=(pipe, sink, tail), daemon=True)
                 for pipe, sink, tail in ((proc.stdout, sys.stdout, tails[0]),
                                          (proc.stderr, sys.stderr, tails[1]))]
        for t in pumps:
            t.start()
        returncode = proc.wait()
        for t in pumps:
            t.join()
    finally:
        _restore(previous)
    return Finished(returncode, bytes(tails[0].data), bytes(tails[1].data),
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


def _forward_signals(proc: subprocess.Popen) -> dict:
    if threading.current_thread() is not threading.main_thread():
        return {}  # only the main thread may set handlers

    def forward(signum: int, _frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)
    return {s: signal.signal(s, forward) for s in FORWARDED}


def _restore(previous: dict) -> None:
    for s, handler in previous.items():
        signal.signal(s, handler)
