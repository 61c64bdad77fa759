"""The scenarios of one backend, each a median of `rounds` runs, interleaved round by round so
that a ratio is made of measurements taken side by side on a machine whose speed drifts.

Closed loop (wrk): the no-op ceiling, claims of new keys, replays, the claim -> complete
cycle, hot-key contention, lookups, batch claims; with the database limit of the same
statements (bench.dblimit) in every round. Then: claims and no-ops at a constant half of the
claims' maximum rate (p99); claims and lookups as the table grows; the sweep (a hook).
"""
from __future__ import annotations

import json
import threading
import time
import urllib.request
from dataclasses import asdict
from pathlib import Path

from . import dblimit, loadgen, sweep
from .common import SECRET, SIGNATURE, Progress, median
from .databases import BenchDb, load_rows, open_db
from .loadgen import Run
from .profiles import Profile
from .servers import Service

# scenario -> (wrk mode, connections attribute, HTTP statuses that count as answered)
CLOSED = {
    "noop": ("noop", "connections", {200}),
    "claim_new": ("claim", "connections", {201}),
    "replay": ("replay", "connections", {200}),
    "cycle": ("cycle", "connections", {200, 201}),
    "hot_keys": ("hot", "hot_connections", {201, 409}),
    "lookup": ("lookup", "connections", {200}),
    "batch": ("batch", "batch_connections", {200}),
    # issue 17: do claims rise with more connections (group commit needs them to)?
    "claim_new_64": ("claim", "hot_connections", {201}),
    # the gateway's public path: a provider's delivery with a new event id, 202
    "ingest": ("ingest", "connections", {202}),
}
LIMITS = {"claim_new": "claim", "replay": "replay", "lookup": "lookup", "batch": "batch"}


def summarize(runs: list[Run], expected: set[int]) -> dict:
    unexpected = sum(n for code, n in _merged(runs).items() if int(code) not in expected)
    return {"rps": median([r.rps for r in runs]), "p50_ms": median([r.p50_us for r in runs]) / 1e3,
            "p99_ms": median([r.p99_us for r in runs]) / 1e3,
            "runs_rps": [round(r.rps, 1) for r in runs], "status": _merged(runs),
            "failures": sum(r.failures for r in runs), "unexpected": unexpected}


def _merged(runs: list[Run]) -> dict:
    out: dict[str, int] = {}
    for r in runs:
        for code, n in r.status.items():
            out[code] = out.get(code, 0) + n
    return out


class Bench:
    """One backend's measurements against one running service."""

    def __init__(self, backend: str, profile: Profile, workdir: Path, progress: Progress):
        self.backend, self.p, self.workdir, self.say = backend, profile, workdir, progress
        self.rss: list[float] = []
        self.tag = f"r{time.time_ns() % 10**10}"
        self.seq = 0

    def _prefix(self) -> str:
        self.seq += 1
        return f"{self.tag}-{self.seq}"

    def _service(self, db: BenchDb, name: str, workers: int | None = None) -> Service:
        log = self.workdir / f"{self.backend}-{name}.log"
        return Service(db.url, log, workers or self.p.workers, self.p.threads).start()

    def _wrk(self, svc: Service, db: BenchDb, scenario: str, key_range: int = 1,
             connections: int | None = None, seconds: float | None = None,
             spread: list | None = None) -> Run:
        mode, conn_attr, _ = CLOSED[scenario]
        if spread is not None:  # sampled in the middle of the run
            timer = threading.Timer((seconds or self.p.seconds) / 2,
                                    lambda: spread.append(svc.connection_spread()))
            timer.start()
        token, extra = db.token, ()
        if mode == "ingest":  # the ingest URL's id stands where the token goes
            token, extra = ingest_id(svc, db), (SIGNATURE,)
        run = loadgen.wrk(svc.url, mode, token, self._prefix(), extra=extra,
                          seconds=seconds or self.p.seconds,
                          connections=connections or getattr(self.p, conn_attr),
                          key_range=key_range)
        self.rss.append(max(svc.worker_rss_mb() or [0.0]))
        return run

    # --- the closed-loop scenarios and their limits ------------------------------------

    def closed_loop(self) -> dict:
        db = open_db(self.backend, self.workdir)
        try:
            load_rows(db, self.p.base_rows, progress=self.say)
            svc = self._service(db, "main")
            try:
                return self._closed_loop(svc, db)
            finally:
                svc.stop()
        finally:
            db.close()

    def _closed_loop(self, svc: Service, db: BenchDb) -> dict:
        self._wrk(svc, db, "noop", seconds=1)  # warm-up: imports, pools, first statements
        self._wrk(svc, db, "claim_new", seconds=1)
        runs: dict[str, list[Run]] = {s: [] for s in CLOSED}
        limits: dict[str, list[float]] = {s: [] for s in LIMITS}
        spread: list[list[int]] = []
        for r in range(self.p.rounds):
            for scenario in CLOSED:
                run = self._wrk(svc, db, scenario, key_range=self.p.base_rows,
                                spread=spread if scenario in ("noop", "claim_new") else None)
                runs[scenario].append(run)
                self.say(f"  [{self.backend} round {r + 1}/{self.p.rounds}] {scenario:10s} "
                         f"{run.rps:8.1f} req/s  p50 {run.p50_us / 1e3:6.1f} ms  "
                         f"p99 {run.p99_us / 1e3:6.1f} ms  {run.status}")
            for scenario, mode in LIMITS.items():
                rate = dblimit.limit(db, mode, self.p.seconds, self.p.base_rows)
                limits[scenario].append(rate)
                self.say(f"  [{self.backend} round {r + 1}/{self.p.rounds}] limit "
                         f"{scenario:10s} {rate:8.1f}/s (no HTTP)")
        out = {s: summarize(runs[s], CLOSED[s][2]) for s in CLOSED}
        for s in LIMITS:
            out[s]["limit"] = median(limits[s])
            out[s]["limit_runs"] = [round(x, 1) for x in limits[s]]
        out["batch"]["keys_per_s"] = out["batch"]["rps"] * dblimit.BATCH
        out["cycle"]["cycles_per_s"] = out["cycle"]["rps"] / 2
        out["_locked_in_log"] = svc.log_mentions("database is locked")
        out["_connection_spread"] = spread
        out["_latency"] = self._half_rate(svc, db, out["claim_new"]["rps"])
        return out

    def _half_rate(self, svc: Service, db: BenchDb, max_rps: float) -> dict:
        """p99 of claims and of no-ops at half the claims' maximum rate (open loop)."""
        rate = max(1.0, max_rps / 2)
        runs: dict[str, list[Run]] = {"noop": [], "claim": []}
        for r in range(self.p.rounds):
            for mode in runs:
                run = loadgen.constant_rate(svc.url, mode, db.token, self._prefix(),
                                            rate=rate, seconds=self.p.rate_seconds)
                runs[mode].append(run)
                self.rss.append(max(svc.worker_rss_mb() or [0.0]))
                self.say(f"  [{self.backend} round {r + 1}/{self.p.rounds}] {mode} at "
                         f"{rate:.0f}/s: p50 {run.p50_us / 1e3:.1f} ms  p99 "
                         f"{run.p99_us / 1e3:.1f} ms  {run.status} {run.errors or ''}")
        return {"rate": rate,
                **{m: summarize(v, {200} if m == "noop" else {201}) for m, v in runs.items()}}

    # --- growth: claims and lookups with more and more rows ----------------------------

    def growth(self) -> dict:
        db = open_db(self.backend, self.workdir)
        try:
            svc = None
            out = {}
            for size in self.p.sizes:
                seconds = load_rows(db, size, progress=self.say)
                if svc is None:
                    svc = self._service(db, "growth")
                    self._wrk(svc, db, "claim_new", seconds=1)
                runs: dict[str, list[Run]] = {"claim_new": [], "lookup": []}
                for _ in range(self.p.rounds):
                    for scenario in runs:
                        runs[scenario].append(self._wrk(
                            svc, db, scenario, key_range=size,
                            connections=self.p.growth_connections))
                out[str(size)] = {s: summarize(v, CLOSED[s][2]) for s, v in runs.items()}
                out[str(size)]["load_seconds"] = round(seconds, 1)
                self.say(f"  [{self.backend} growth] {size:>9,} rows: claim p50 "
                         f"{out[str(size)]['claim_new']['p50_ms']:.2f} ms, lookup p50 "
                         f"{out[str(size)]['lookup']['p50_ms']:.2f} ms")
            if svc is not None:
                out["_sweep"] = sweep.measure(svc, db, self.p, self._prefix, self.say,
                                              self.rss)
                svc.stop()
            return out
        finally:
            db.close()

    # --- 1 and 2 instances on one database (PostgreSQL) --------------------------------

    def instances(self) -> dict:
        from concurrent.futures import ThreadPoolExecutor
        db = open_db(self.backend, self.workdir)
        configs = {"1x4": [4], "1x2": [2], "2x2": [2, 2]}
        runs: dict[str, list[float]] = {c: [] for c in configs}
        try:
            for _ in range(self.p.instance_rounds):
                for name, workers in configs.items():
                    svcs = [self._service(db, f"inst{i}", w) for i, w in enumerate(workers)]
                    try:
                        conns = max(2, self.p.connections // len(svcs))
                        with ThreadPoolExecutor(len(svcs)) as pool:
                            rs = list(pool.map(lambda s: self._wrk(
                                s, db, "claim_new", connections=conns), svcs))
                    finally:
                        for s in svcs:
                            s.stop()
                    runs[name].append(sum(r.rps for r in rs))
                    self.say(f"  [instances {name}] {runs[name][-1]:.1f} claims/s")
        finally:
            db.close()
        return {name: {"rps": median(v), "runs_rps": [round(x, 1) for x in v]}
                for name, v in runs.items()}


def ingest_id(svc: Service, db: BenchDb) -> str:
    """The ingest id of the service's benchmark source (made once per database): generic,
    signed like bench/gateway.py's (HMAC-SHA256 of the body), the event id from X-Event-Id.
    The benchmark's services run no relays, so the accepted events stay queued and the
    scenario measures the ingest alone."""
    if not db.ingest_id:
        body = json.dumps({"name": "bench", "provider": "generic", "secrets": [SECRET],
                           "signature": {"header": "X-Signature", "algorithm": "sha256",
                                         "encoding": "hex", "prefix": "sha256="},
                           "event_id": {"header": "X-Event-Id"},
                           "destination": {"url": "http://127.0.0.1:9/unused"}}).encode()
        req = urllib.request.Request(svc.url + "/v1/sources", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {db.operator_token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            db.ingest_id = json.loads(r.read())["source"]["ingest_url"].rsplit("/", 1)[1]
    return db.ingest_id


def run_backend(backend: str, profile: Profile, workdir: Path, progress: Progress) -> dict:
    bench = Bench(backend, profile, workdir, progress)
    progress(f"== {backend}: closed-loop scenarios and database limits")
    closed = bench.closed_loop()
    progress(f"== {backend}: growth {', '.join(f'{s:,}' for s in profile.sizes)} rows")
    growth = bench.growth()
    result = {"closed": closed, "growth": growth}
    if backend == "postgres":
        progress("== postgres: 1 and 2 instances on one database")
        result["instances"] = bench.instances()
    result["rss_mb_max"] = max(bench.rss or [0.0])
    result["profile"] = asdict(profile)
    return result
