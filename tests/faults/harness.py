"""The fault suite's tools: a private PostgreSQL that can be killed without disturbing
anything else, and a load of workers doing claim -> effect -> complete with the Python client
(the effect in tests/support's EffectSink, fenced or not), with the figures every scenario
reports."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import requests
from keystore_client import (
    ConnectError,
    InProgress,
    KeyStore,
    KeyStoreError,
    LeaseLost,
    NeedsReconciliation,
    OutcomeUnknown,
    RetryPolicy,
    Unavailable,
    new_lease_token,
)

from tests.support import EffectSink, free_port

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "faults"


# --- a PostgreSQL of the test's own --------------------------------------------------------

def _pg_bin() -> Path:
    versions = sorted(Path("/usr/lib/postgresql").iterdir(), key=lambda p: int(p.name))
    return versions[-1] / "bin"


class PrivatePostgres:
    """initdb + pg_ctl as the postgres user, on a free port: stopping it abruptly
    (`pg_ctl stop -m immediate`, what pg_ctlcluster's -m immediate does) disturbs no one."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="keystore-pg-"))
        self.port = free_port()
        self.data = self.dir / "data"
        shutil.chown(self.dir, "postgres")
        self._as_postgres([str(_pg_bin() / "initdb"), "-D", str(self.data), "-A", "trust",
                           "-U", "postgres", "--no-sync"], timeout=120)
        conf = self.data / "postgresql.conf"
        conf.write_text(conf.read_text() + f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'"
                        f"\nunix_socket_directories = '{self.dir}'\nfsync = on\n"
                        "max_connections = 200\n")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, args: list[str], timeout: float = 60) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *args], check=True, timeout=timeout,
                       capture_output=True)

    def start(self) -> float:
        started = time.monotonic()
        self._as_postgres([str(_pg_bin() / "pg_ctl"), "-D", str(self.data), "-l",
                           str(self.dir / "log"), "-w", "start"], timeout=120)
        return time.monotonic() - started

    def stop_immediately(self) -> None:
        self._as_postgres([str(_pg_bin() / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                           "stop"])

    def destroy(self) -> None:
        try:
            self._as_postgres([str(_pg_bin() / "pg_ctl"), "-D", str(self.data), "-m",
                               "immediate", "stop"])
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


# --- the load: workers doing claim -> effect -> complete -----------------------------------

@dataclass
class Op:
    key: str
    outcome: str = "not_tried"  # done | replayed | unresolved | mismatch | gave_up
    acked_result: Optional[str] = None  # the resource id of an acknowledged completion
    claims: int = 0
    unknown_claims: int = 0  # claim answers lost in flight (the claim may have landed)
    # proposed by every claim of this operation (contract v1.1): a repeat after a lost answer
    # resumes what the lost claim acquired instead of meeting it as in_progress
    token: str = field(default_factory=new_lease_token)


@dataclass
class Load:
    urls: list[str]
    token: str
    sink: EffectSink
    scope: str = "invoice"
    lease_seconds: int = 3
    on_stale: str = "reconcile"
    deadline_seconds: float = 60
    successes: list[float] = field(default_factory=list)  # monotonic times of 2xx answers
    errors: Counter = field(default_factory=Counter)
    crashes: list[str] = field(default_factory=list)  # exceptions that escaped the client
    enough: threading.Event = field(default_factory=threading.Event)  # take no new ops

    def client(self, n: int) -> KeyStore:
        policy = RetryPolicy(tries=8, base_delay=0.1, max_delay=1.0, budget=10.0)
        return KeyStore(self.urls[n % len(self.urls)], self.token, timeout=5, retry=policy)

    def run_op(self, ks: KeyStore, op: Op, stop_at: float) -> None:
        """One operation to its end: exactly one effect, or an honest 'unresolved'."""
        while time.monotonic() < stop_at:
            op.claims += 1
            try:
                claimed = ks.claim(self.scope, op.key, payload={"op": op.key},
                                   lease_seconds=self.lease_seconds, on_stale=self.on_stale,
                                   lease_token=op.token)
            except OutcomeUnknown:
                op.unknown_claims += 1  # it may have landed: claiming again resumes it
                self.errors["claim_outcome_unknown"] += 1
                continue
            except InProgress as exc:
                time.sleep(min(exc.retry_after or 0.5, 1.0))
                continue
            except NeedsReconciliation:
                op.outcome = "unresolved"
                return
            except (ConnectError, Unavailable) as exc:
                self.errors[type(exc).__name__] += 1
                time.sleep(0.2)
                continue
            except KeyStoreError as exc:
                self.errors[getattr(exc, "code", type(exc).__name__)] += 1
                time.sleep(0.2)
                continue
            self.successes.append(time.monotonic())
            if claimed.replayed:
                op.outcome = "replayed"
                return
            effect = requests.post(f"{self.sink.url}/effects/{op.key}",
                                   json={"attempt": claimed.attempt}, timeout=10)
            if effect.status_code == 409:
                op.outcome = "fenced"
                return
            effect_id = effect.json()["id"]
            op.outcome = self._complete(ks, op, claimed.lease_token, effect_id, stop_at)
            if op.outcome == "done":
                op.acked_result = effect_id
            return
        if op.claims:
            op.outcome = "gave_up"  # the run's time was up while it waited

    def _complete(self, ks: KeyStore, op: Op, token: str, effect_id: str,
                  stop_at: float) -> str:
        while time.monotonic() < stop_at + 30:  # a done effect is worth some extra time
            try:
                ks.complete(self.scope, op.key, token, result={"resource_id": effect_id})
                self.successes.append(time.monotonic())
                return "done"
            except LeaseLost:
                return "lease_lost_after_effect"
            except KeyStoreError as exc:
                self.errors[f"complete_{getattr(exc, 'code', type(exc).__name__)}"] += 1
                time.sleep(0.2)
        return "effect_not_completed"

    def run(self, ops: list[Op], threads: int) -> None:
        stop_at = time.monotonic() + self.deadline_seconds
        queue = list(ops)
        lock = threading.Lock()

        def worker(n: int) -> None:
            ks = self.client(n)
            while not self.enough.is_set():
                with lock:
                    if not queue:
                        return
                    op = queue.pop()
                try:
                    self.run_op(ks, op, stop_at)
                except Exception as exc:  # the client must not let these escape: count them
                    self.crashes.append(f"{type(exc).__name__}: {exc}"[:200])
                    op.outcome = "harness_crash"
        pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(self.deadline_seconds + 120)

    def recovery_after(self, moment: float) -> Optional[float]:
        later = [t for t in self.successes if t >= moment]
        return (min(later) - moment) if later else None


def verify(load: Load, ops: list[Op], lookup: Callable[[str], Optional[dict]]) -> dict:
    """The figures of a run: attempted, effects, duplicates, acknowledged completions lost,
    unresolved (and how they surfaced)."""
    lost, surfaced = 0, Counter()
    for op in ops:
        record = lookup(op.key)
        if op.acked_result is not None:
            stored = (record or {}).get("result") or {}
            if not record or record["state"] != "succeeded" or \
                    stored.get("resource_id") != op.acked_result:
                lost += 1
        elif op.outcome not in ("replayed", "done"):
            state = record["state"] if record else "absent"
            review = (record or {}).get("review")
            surfaced[f"{state}{' + review' if review else ''}"] += 1
    return {
        "operations": len(ops),
        "outcomes": dict(Counter(op.outcome for op in ops)),
        "effects": sum(len(v) for v in load.sink.effects.values()),
        "duplicate_effects": load.sink.duplicates(),
        "fenced_effects_refused": sum(load.sink.refused.values()),
        "acknowledged_completions_lost": lost,
        "unresolved": sum(surfaced.values()),
        "unresolved_surfaced_as": dict(surfaced),
        "claims_with_lost_answers": sum(op.unknown_claims for op in ops),
        "client_errors_retried": dict(load.errors),
        "exceptions_escaping_the_client": len(load.crashes),
    }


def report(name: str, figures: dict) -> dict:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.json").write_text(json.dumps(figures, indent=2, sort_keys=True))
    print(f"\n[{name}] " + json.dumps(figures, sort_keys=True))
    return figures


def kill_random_worker(pids: list[int], rng: random.Random) -> Optional[int]:
    if not pids:
        return None
    pid = rng.choice(pids)
    try:
        os.kill(pid, signal.SIGKILL)
        return pid
    except ProcessLookupError:
        return None
