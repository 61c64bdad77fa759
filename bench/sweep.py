"""The sweep scenario: purge expired rows while claims run at a constant rate.

HOOK(sweep): the command is `keystore sweep` (retention, from the operations issue), run
with the database in KEYSTORE_DATABASE_URL; it purges every expired record in short
batches and exits. KEYSTORE_BENCH_SWEEP_CMD replaces it (a command line, split on spaces)
to measure another sweeper. Where no sweeper answers `--help`, the scenario is reported as
not run, with the reason, instead of failing the whole benchmark.
"""
from __future__ import annotations

import os
import subprocess
import time
from typing import TYPE_CHECKING, Callable

from . import loadgen
from .databases import count_rows, load_rows
from .servers import KEYSTORE

if TYPE_CHECKING:
    from .common import Progress
    from .databases import BenchDb
    from .profiles import Profile
    from .servers import Service

PREFIX = "x-"
SLICE_SECONDS = 5  # claims during the sweep run in slices until it is done


def command() -> list[str]:
    return os.environ.get("KEYSTORE_BENCH_SWEEP_CMD", f"{KEYSTORE} sweep").split()


def available() -> bool:
    try:
        probe = subprocess.run(command() + ["--help"], capture_output=True, timeout=60)
    except OSError:
        return False
    return probe.returncode == 0


def measure(svc: Service, db: BenchDb, p: Profile, prefix: Callable[[], str], say: Progress,
            rss_seen: list[float]) -> dict:
    """The sweep's run and the claims' p99 before and during it; each worker RSS noted
    during it is added to `rss_seen` (the run's largest). `prefix()` gives each run new keys."""
    if not available():
        say("  [sweep] not run: `keystore sweep` is not in this build yet (HOOK(sweep))")
        return {"ran": False, "reason": "`keystore sweep` is not in this build yet"}
    load_rows(db, p.sweep_rows, prefix=PREFIX, expired=True, progress=say)
    rate = 100.0  # a steady, modest claim load: the question is the sweep's effect on it
    before = loadgen.constant_rate(svc.url, "claim", db.token, prefix(), rate=rate,
                                   seconds=p.rate_seconds)
    env = {**os.environ, "KEYSTORE_DATABASE_URL": db.url}
    started = time.monotonic()
    proc = subprocess.Popen(command(), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    during, rss = [], []
    while proc.poll() is None and time.monotonic() - started < 1800:
        during.append(loadgen.constant_rate(svc.url, "claim", db.token, prefix(),
                                            rate=rate, seconds=SLICE_SECONDS))
        rss.append(max(svc.worker_rss_mb() or [0.0]))
    if proc.poll() is None:
        proc.kill()
    err = proc.communicate(timeout=30)[1]
    seconds = time.monotonic() - started
    left = count_rows(db, f"key LIKE '{PREFIX}%'")
    rss_seen.extend(rss)
    worst = max(during, key=lambda r: r.p99_us) if during else before
    out = {"ran": True, "exit_code": proc.returncode, "seconds": round(seconds, 1),
           "rows": p.sweep_rows, "rows_left": left, "rate": rate,
           "p99_before_ms": before.p99_us / 1e3, "p99_during_ms": worst.p99_us / 1e3,
           "failures_during": sum(r.failures for r in during),
           "rss_mb_during": max(rss or [0.0]), "stderr_tail": err[-300:]}
    say(f"  [sweep] {p.sweep_rows:,} rows in {seconds:.1f} s, {left} left; claim p99 "
        f"{out['p99_before_ms']:.1f} ms before, {out['p99_during_ms']:.1f} ms during")
    return out
