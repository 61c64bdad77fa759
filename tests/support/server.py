"""The one server starter of the tests: a real server process on a free loopback port, in a
process group of its own, ready once /readyz answers 200. `keystore serve` by default, or
gunicorn run by hand with the documented config module (`gunicorn=True`)."""
from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import requests

KEYSTORE = str(Path(sys.executable).with_name("keystore"))
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keystore_cli(database_url: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "KEYSTORE_DATABASE_URL": database_url}
    return subprocess.run([KEYSTORE, *args], env=env, capture_output=True, text=True,
                          check=check, timeout=60)


@dataclass
class Server:
    """A server of `database_url`: `log_path` takes its stdout and stderr (appended), or its
    stdout only when `err_path` is given; `open_files` sets its `ulimit -n` (soft and hard)."""

    database_url: str
    workers: int = 2
    threads: int = 4
    env: dict = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: Optional[subprocess.Popen] = None
    log_path: Optional[Path] = None
    err_path: Optional[Path] = None
    cwd: Optional[Path] = None
    gunicorn: bool = False  # `gunicorn -c python:keystore_service.gunicorn_conf`, as documented
    open_files: Optional[int] = None
    # tokens that the fixture which started the server made for its tests (new_token)
    token: Optional[str] = None
    operator_token: Optional[str] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def backend(self) -> str:
        return "sqlite" if self.database_url.startswith("sqlite") else "postgres"

    def argv(self) -> list[str]:
        if self.gunicorn:  # its threads come from the config module
            return [GUNICORN, "-c", "python:keystore_service.gunicorn_conf",
                    "--bind", f"127.0.0.1:{self.port}", "--workers", str(self.workers)]
        return [KEYSTORE, "serve", "--port", str(self.port), "--workers", str(self.workers),
                "--threads", str(self.threads)]

    def start(self, timeout: float = 30) -> Server:
        env = {**os.environ, "KEYSTORE_DATABASE_URL": self.database_url, **self.env}
        if self.gunicorn:  # the config module makes its own metrics directory
            env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        limit = self.open_files
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        err = open(self.err_path, "ab") if self.err_path else out
        try:
            self.proc = subprocess.Popen(
                self.argv(), env=env, cwd=self.cwd, stdout=out, stderr=err,
                start_new_session=True, preexec_fn=None if limit is None else (
                    lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))))
        finally:
            for f in {out, err} - {subprocess.DEVNULL}:
                f.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}"
                                   f"{self._log_tail()}")
            try:
                if requests.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the server did not become ready{self._log_tail()}")

    def _log_tail(self) -> str:
        path = self.err_path or self.log_path
        return f": {path.read_text(errors='replace')[-2000:]}" if path else ""

    def worker_pids(self) -> list[int]:
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                             text=True).stdout
        return [int(p) for p in out.split()]

    def kill(self) -> None:
        """SIGKILL the whole server: master and workers, no chance to clean up."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM, a graceful stop; SIGKILL if it has not stopped within 30 s."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
