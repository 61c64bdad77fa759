"""Shared test helpers: a settable clock, free ports, and a real `keystore serve` process."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import requests

T0 = 1_800_000_000_000_000  # 2027-01-15T08:00:00Z in microseconds: a fixed "now" for tests
SECOND = 1_000_000
KEYSTORE = str(Path(sys.executable).with_name("keystore"))


class FakeClock:
    """A clock the test moves by hand: `now` is whatever the test says it is."""

    def __init__(self, now: int = T0):
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float = 0, micros: int = 0) -> int:
        self.now += int(seconds * SECOND) + micros
        return self.now


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keystore_cli(database_url: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "KEYSTORE_DATABASE_URL": database_url}
    return subprocess.run([KEYSTORE, *args], env=env, capture_output=True, text=True,
                          check=check, timeout=60)


def new_token(database_url: str, tenant: str, role: str = "client") -> str:
    """A token for `tenant` (created if missing), straight through the accounts module."""
    from keystore_service.storage.accounts import AccountError, Accounts
    from keystore_service.storage.db import Database, create
    database = Database(create(database_url, pool_size=1))
    try:
        accounts = Accounts(database)
        try:
            accounts.create_tenant(tenant, T0)
        except AccountError:
            pass  # exists already
        return accounts.create_token(tenant, role, None, T0)
    finally:
        database.engine.dispose()


@dataclass
class Server:
    """`keystore serve` in its own process group, on a free loopback port."""

    database_url: str
    workers: int = 2
    threads: int = 4
    env: dict = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: Optional[subprocess.Popen] = None
    log_path: Optional[Path] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> Server:
        env = {**os.environ, "KEYSTORE_DATABASE_URL": self.database_url, **self.env}
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [KEYSTORE, "serve", "--port", str(self.port), "--workers", str(self.workers),
             "--threads", str(self.threads)], env=env, stdout=log, stderr=log,
            start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"keystore serve exited with {self.proc.returncode}")
            try:
                if requests.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("keystore serve did not become ready")

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
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


class Api:
    """A thin HTTP helper for tests: every call returns (status, json body, headers)."""

    def __init__(self, base: str, token: str, session: Optional[requests.Session] = None):
        self.base, self.session = base, session or requests.Session()
        self.headers = {"Authorization": f"Bearer {token}"}

    def post(self, path: str, body: dict):
        r = self.session.post(self.base + path, json=body, headers=self.headers, timeout=30)
        return r.status_code, r.json(), r.headers

    def get(self, path: str, **params):
        r = self.session.get(self.base + path, params=params, headers=self.headers, timeout=60)
        return r.status_code, r.json(), r.headers


class Http:
    """Flask's test client with a token: (status, json, headers) from every call."""

    def __init__(self, client, token: str):
        self.client, self.token = client, token

    def _auth(self, token):
        token = self.token if token is ... else token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def post(self, path, body=None, *, token=..., raw=None, headers=None):
        kwargs = {"data": raw} if raw is not None else {"json": body}
        r = self.client.post(path, headers={**self._auth(token), **(headers or {})}, **kwargs)
        return r.status_code, r.get_json(silent=True), r.headers

    def get(self, path, *, token=..., **params):
        r = self.client.get(path, query_string=params, headers=self._auth(token))
        return r.status_code, r.get_json(silent=True), r.headers
