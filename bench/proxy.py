"""`python -m bench proxy`: how wrk's keep-alive connections spread over the gthread workers
directly, through the nginx recipe (deploy/nginx/keystore.conf), and through the same recipe
with a keep-alive upstream pool added, side by side in one run (docs/benchmarks.md, "Behind
the TLS proxy"; the choice it led to is explained in docs/deployment.md).

For each arm and round: wrk -c16 against the no-op and the claim of new keys; the service's
established connections per worker sampled mid-run (`ss`, as the main benchmark does), and
the CPU seconds each worker spent during the run (/proc/PID/stat), which shows where the
work went even when connections are short-lived. SQLite: the spread does not depend on the
backend.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.support.nginx import Nginx  # the recipe's runner, one home: the proxy tests'

from . import loadgen
from .databases import open_db
from .servers import Service

ARMS = {  # the arm's upstream keep-alive lines in place of the recipe's (None: as shipped)
    "direct": False,
    "nginx, a connection per request": "",
    "nginx, keepalive 32 (renewed every 1000 requests, nginx's default)":
        "    keepalive 32;\n    keepalive_requests 1000;\n",
    "nginx, keepalive 32 renewed every 20 requests (the recipe)": None,
}
MODES = {"noop": "noop", "claims": "claim"}
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[pid] = (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
        except (OSError, IndexError):
            pass
    return out


def shares(before: dict[int, float], after: dict[int, float]) -> list[float]:
    used = [after[p] - before.get(p, 0.0) for p in after]
    total = sum(used) or 1.0
    return sorted((round(u / total, 2) for u in used), reverse=True)


def measure(svc: Service, url: str, mode: str, token: str, prefix: str, seconds: float,
            connections: int) -> dict:
    spread: list[list[int]] = []
    timer = threading.Timer(seconds / 2, lambda: spread.append(svc.connection_spread()))
    pids = svc.worker_pids()
    before = cpu_seconds(pids)
    timer.start()
    run = loadgen.wrk(url, mode, token, prefix, seconds=seconds, connections=connections)
    timer.join()
    return {"rps": round(run.rps, 1), "p50_ms": round(run.p50_us / 1e3, 2),
            "p99_ms": round(run.p99_us / 1e3, 2), "status": run.status,
            "failures": run.failures, "connections_per_worker": spread[0] if spread else [],
            "cpu_share_per_worker": shares(before, cpu_seconds(pids))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench proxy", description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=6)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    a = p.parse_args(argv)
    loadgen.ensure_wrk()
    work = Path(tempfile.mkdtemp(prefix="keystore-bench-proxy-"))
    db = open_db("sqlite", work)
    svc = Service(db.url, work / "service.log").start()
    results: dict[str, dict[str, list]] = {arm: {m: [] for m in MODES} for arm in ARMS}
    try:
        seq = 0
        for r in range(a.rounds):
            for i, (arm, extra) in enumerate(ARMS.items()):
                # arms in turn within each round (same minute, same machine); each proxy is
                # started for its turn and stopped after it, so no idle pooled connection
                # of one arm is counted in another's spread
                proxy = None if extra is False else Nginx(
                    work / f"nginx-{r}-{i}", upstream=f"127.0.0.1:{svc.port}", pool=extra,
                    workers=2).start()
                try:
                    for name, mode in MODES.items():
                        seq += 1
                        got = measure(svc, proxy.url if proxy else svc.url, mode, db.token,
                                      f"px{os.getpid()}-{seq}", a.seconds, a.connections)
                        results[arm][name].append(got)
                        print(f"round {r + 1} {arm:60s} {name:6s} {got['rps']:8.1f} req/s  "
                              f"p99 {got['p99_ms']:7.1f} ms  connections "
                              f"{got['connections_per_worker']}  cpu "
                              f"{got['cpu_share_per_worker']}  {got['status']}",
                              file=sys.stderr, flush=True)
                finally:
                    if proxy:
                        proxy.stop()
                time.sleep(0.5)  # let the closed connections leave `ss`
    finally:
        svc.stop()
        db.close()
    failures = sum(g["failures"] for arm in results.values() for runs in arm.values()
                   for g in runs)
    body = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "seconds": a.seconds, "rounds": a.rounds, "connections": a.connections,
            "workers": svc.workers, "threads": svc.threads, "arms": results}
    text = json.dumps(body, indent=1)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
