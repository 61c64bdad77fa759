"""The fault suite's tools for the gateway: `keystore relay` processes to SIGKILL and start
again, finding which processes are forwarding at this instant (their TCP connections to the
workflow whose requests the sink is still answering), and a loop of kills under load."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tests.gateway.guarded_sink import GuardedSink
from tests.support import KEYSTORE


class RelayProcess:
    """`keystore relay` in a session of its own; kill() is a SIGKILL, start() a new one."""

    def __init__(self, database_url: str, env: dict, log_path: Path, concurrency: int = 8):
        self.env = {**os.environ, "KEYSTORE_DATABASE_URL": database_url, **env}
        self.log_path, self.concurrency = log_path, concurrency
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> RelayProcess:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [KEYSTORE, "relay", "--concurrency", str(self.concurrency), "--progress", "0"],
            env=self.env, stdout=log, stderr=log, start_new_session=True)
        log.close()
        return self

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc and self.proc.poll() is None else None

    def kill(self) -> None:
        if self.pid:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.pid:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(25)
            except subprocess.TimeoutExpired:
                self.kill()


def forwarding_now(sink: GuardedSink, pids: list[int]) -> set[int]:
    """Those of `pids` that hold a connection on which the sink is answering a forward right
    now (read from /proc: the connections' client ports, then the processes' sockets)."""
    ports = set(sink.in_flight)
    if not ports:
        return set()
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                local, remote = int(cols[1].rsplit(":", 1)[1], 16), \
                    int(cols[2].rsplit(":", 1)[1], 16)
                if local in ports and remote == sink.port:
                    inodes.add(f"socket:[{cols[9]}]")
    found = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    found.add(pid)
                    break
        except OSError:
            pass  # it exited meanwhile
    return found


@dataclass
class Kills:
    """SIGKILLs made, and how many of them hit a process while it was forwarding."""

    made: int = 0
    mid_forward: int = 0
    times: list[float] = field(default_factory=list)


def kill_loop(stop: threading.Event, sink: GuardedSink, every: float, rng: random.Random,
              candidates: Callable[[], list[int]], kill: Callable[[int], None],
              kills: Kills, patience: float = 0.5) -> threading.Thread:
    """Every `every` s (x0.5-1.5), SIGKILL one of `candidates()`, waiting up to `patience`
    s for one that is forwarding at that instant (and else any of them)."""
    def loop() -> None:
        while not stop.wait(every * rng.uniform(0.5, 1.5)):
            pids = candidates()
            if not pids:
                continue
            give_up = time.monotonic() + patience
            busy: set[int] = set()
            while not busy and time.monotonic() < give_up:
                busy = forwarding_now(sink, pids)
                if not busy:
                    time.sleep(0.01)
            victim = rng.choice(sorted(busy) or pids)
            try:
                kill(victim)
            except ProcessLookupError:
                continue
            kills.made += 1
            kills.mid_forward += bool(busy)
            kills.times.append(time.monotonic())
    thread = threading.Thread(target=loop, name="kills", daemon=True)
    thread.start()
    return thread
