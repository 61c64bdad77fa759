"""Before/after a change to the service, measured side by side in one run:

    python -m bench ab --baseline HEAD~1 --backend postgres --scenario batch [--rounds 3]

Starts the service twice on one database: from a temporary checkout of `--baseline` and
from this tree. Rounds alternate (no-op and scenario on A, then on B), so both see the same
machine; prints the medians, each side's ratio to its own no-op, and after/before.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from . import loadgen
from .databases import load_rows, open_db
from .common import median
from .scenarios import CLOSED
from .servers import Service

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", required=True, help="a git revision of this repository")
    p.add_argument("--backend", choices=["sqlite", "postgres"], required=True)
    p.add_argument("--scenario", action="append", choices=[s for s in CLOSED if s != "noop"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=8)
    p.add_argument("--workers", type=int, default=4)
    a = p.parse_args()
    scenarios = a.scenario or ["claim_new"]
    workdir = Path(tempfile.mkdtemp(prefix="keystore-ab-"))
    base = workdir / "baseline"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base),
                    a.baseline], check=True, capture_output=True)
    db = open_db(a.backend, workdir)
    runs: dict[tuple[str, str], list] = {}
    try:
        load_rows(db, 10_000, progress=lambda m: None)
        for r in range(a.rounds):
            for side, source in (("before", base), ("after", None)):
                svc = Service(db.url, workdir / f"{side}.log", a.workers, source=source).start()
                try:
                    loadgen.wrk(svc.url, "claim", db.token, f"w{side}{r}", seconds=1,
                                connections=16)
                    for s in ["noop", *scenarios]:
                        mode, conn_attr, _ = CLOSED[s]
                        conns = {"connections": 16, "hot_connections": 64,
                                 "batch_connections": 8}[conn_attr]
                        run = loadgen.wrk(svc.url, mode, db.token, f"{side}{r}{s}",
                                          seconds=a.seconds, connections=conns,
                                          key_range=10_000)
                        runs.setdefault((side, s), []).append(run.rps)
                        print(f"round {r + 1} {side:6s} {s:10s} {run.rps:8.1f}/s "
                              f"p50 {run.p50_us / 1e3:.1f} ms {run.status}", flush=True)
                finally:
                    svc.stop()
    finally:
        db.close()
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                       capture_output=True)
    for s in scenarios:
        b, af = median(runs[("before", s)]), median(runs[("after", s)])
        nb, na = median(runs[("before", "noop")]), median(runs[("after", "noop")])
        print(f"{a.backend} {s}: before {b:.1f}/s ({b / nb:.3f} of no-op), after {af:.1f}/s "
              f"({af / na:.3f} of no-op); after/before {af / b:.2f}")


if __name__ == "__main__":
    sys.exit(main())
