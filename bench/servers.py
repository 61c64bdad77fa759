"""`keystore serve` as the benchmark runs it: its own process group, a free loopback port,
the bench-only no-op endpoint switched on, and its log in a file the harness can search
(for "database is locked"). Also: resident memory of the gunicorn workers."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from cryptography.fernet import Fernet

KEYSTORE = str(Path(sys.executable).with_name("keystore"))


BENCH_SECRET_KEY = Fernet.generate_key().decode()  # seals the benchmark source's nothing


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Service:
    database_url: str
    log_path: Path
    workers: int = 4
    threads: int = 4
    env: dict = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: Optional[subprocess.Popen] = None
    source: Optional[Path] = None  # run keystore_service from this tree instead (bench.ab)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> "Service":
        env = {**os.environ, "KEYSTORE_DATABASE_URL": self.database_url,
               "KEYSTORE_BENCH_NOOP": "1", "KEYSTORE_LOG_LEVEL": "WARNING",
               # the background jobs would write at moments of their own; the sweep
               # scenario runs `keystore sweep` itself
               "KEYSTORE_SWEEP_INTERVAL_SECONDS": "0",
               "KEYSTORE_RECONCILE_INTERVAL_SECONDS": "0",
               # the ingest scenario's events stay queued: it measures the ingest alone
               "KEYSTORE_RELAY_IN_SERVE": "false",
               # and its source takes what it is sent (the default answers 429 past 200/s)
               "KEYSTORE_HOOK_RATE_LIMIT_PER_SECOND": "0",
               # a source needs one on PostgreSQL (SQLite's serve makes one beside the file)
               "KEYSTORE_SECRET_KEY": BENCH_SECRET_KEY, **self.env}
        command = [KEYSTORE]
        if self.source is not None:  # PYTHONPATH comes before the editable install's finder
            env["PYTHONPATH"] = str(self.source)
            command = [sys.executable, "-c", "import sys; from keystore_service.cli import main;"
                       " sys.argv[0] = 'keystore'; main()"]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            command + ["serve", "--port", str(self.port), "--workers", str(self.workers),
                       "--threads", str(self.threads)], env=env, stdout=log, stderr=log,
            start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"keystore serve exited with {self.proc.returncode}; "
                                   f"see {self.log_path}")
            if self._ready() and len(self.worker_pids()) >= self.workers:
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"keystore serve did not become ready; see {self.log_path}")

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def worker_pids(self) -> list[int]:
        if self.proc is None:
            return []
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                             text=True).stdout
        return [int(p) for p in out.split()]

    def worker_rss_mb(self) -> list[float]:
        """Resident memory (VmRSS) of each worker, in MiB."""
        sizes = []
        for pid in self.worker_pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        sizes.append(int(line.split()[1]) / 1024)
            except OSError:
                pass  # a worker that was just replaced
        return sizes

    def connection_spread(self) -> list[int]:
        """How many established client connections each worker holds now, largest first:
        with gthread workers, keep-alive connections stay on the worker that accepted them."""
        out = subprocess.run(["ss", "-Htnp", "state", "established", "(", "sport", "=",
                              f":{self.port}", ")"], capture_output=True, text=True).stdout
        per: dict[str, int] = {str(p): 0 for p in self.worker_pids()}
        for pid in re.findall(r"pid=(\d+)", out):
            if pid in per:
                per[pid] += 1
        return sorted(per.values(), reverse=True)

    def log_mentions(self, text: str) -> int:
        try:
            return self.log_path.read_text(errors="replace").lower().count(text.lower())
        except OSError:
            return 0

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
