"""Where a request's time goes: py-spy samples every worker while wrk drives one scenario.

    python -m bench profile --backend postgres --mode claim [--seconds 15] [--out FILE]

py-spy records with `--idle`, so a thread waiting for the database is sampled too. Only
samples of threads that are serving a request count (gunicorn's gthread `handle` frame is on
the stack); a thread waiting for work is not cost. The report gives, per request sample:
self time by package (the leaf frame), and inclusive time of the steps of the hot path.
The collapsed stacks are kept next to the report (flamegraph.pl or speedscope read them).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

from . import loadgen
from .databases import load_rows, open_db
from .servers import Service

FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^():]*)(?::\d+)?\)$")
STEPS = {  # inclusive: the sample is inside this function (keystore_service module:function)
    "auth (token cache)": ("service/auth.py", "authenticate"),
    "parse + validate body": ("web/api/parsing.py", "body"),
    "fingerprint (RFC 8785 + SHA-256)": ("domain/canonical.py", "fingerprint"),
    "service.claim (all)": ("service/claims.py", "claim"),
    "new lease token": ("service/fencing.py", "new_lease_token"),
    "store.claim (pool + SQL)": ("storage/records.py", "claim_with_trace"),
    "  of which: execute + fetch": ("storage/sql.py", "one"),
    "  of which: pool checkout/return": ("storage/db.py", "connection"),
    "render (record_json + respond)": ("web/api/render.py", "respond"),
    "record_json": ("web/api/render.py", "record_json"),
    "batch: service (BatchClaims.claim)": ("service/batch.py", "claim"),
    "batch: _item_json": ("web/api/api.py", "_item_json"),
    "lookup: service": ("service/claims.py", "lookup"),
}


def package(file: str) -> str:
    """py-spy names files relative to sys.path: `flask/app.py`, `threading.py`."""
    if "site-packages/" in file:
        file = file.split("site-packages/", 1)[1]
    if file.startswith("keystore_service/"):
        return file
    if "/" in file and not file.startswith(("<", "concurrent/", "json/", "email/",
                                             "logging/", "http/", "urllib/")):
        return file.split("/", 1)[0]
    return "stdlib"


def summarize(raw: str) -> str:
    self_time: Counter = Counter()
    steps: Counter = Counter()
    total = idle = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [FRAME.match(f) for f in stack.split(";")]
        frames = [(m.group("fn").strip(), m.group("file")) for m in frames if m]
        n = int(count)
        if not any(fn.endswith((".handle", ".handle_request")) and "gthread" in file
                   for fn, file in frames):
            idle += n
            continue
        total += n
        fn, file = frames[-1]
        self_time[package(file)] += n
        seen = set()
        for step, (mod, func) in STEPS.items():
            if any(f.rsplit(".", 1)[-1] == func and p.endswith("keystore_service/" + mod)
                   for f, p in frames):
                seen.add(step)
        steps.update({s: n for s in seen})
    if not total:
        return "no request samples (was the load running?)\n"
    lines = [f"request samples: {total} (other thread samples, waiting for work: {idle})", "",
             "self time by package (leaf frame; 'waiting' is in the socket/driver):"]
    lines += [f"  {100 * n / total:5.1f}%  {pkg}" for pkg, n in self_time.most_common(25)]
    lines += ["", "inclusive time of the steps of the hot path:"]
    lines += [f"  {100 * steps[s] / total:5.1f}%  {s}" for s in STEPS if steps[s]]
    return "\n".join(lines) + "\n"


def record(pids: list[int], seconds: int, outdir: Path) -> str:
    """py-spy on every worker at once; the collapsed stacks of all of them, concatenated."""
    spy = str(Path(sys.executable).with_name("py-spy"))
    files = [outdir / f"spy-{pid}.txt" for pid in pids]
    procs = [subprocess.Popen([spy, "record", "--idle", "--format", "raw", "--rate", "250",
                               "--duration", str(seconds), "--pid", str(pid), "--output",
                               str(f), "--nonblocking"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for pid, f in zip(pids, files)]
    for p in procs:
        p.wait(seconds + 60)
    return "".join(f.read_text() for f in files if f.exists())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["sqlite", "postgres"], required=True)
    p.add_argument("--mode", default="claim",
                   choices=["noop", "claim", "replay", "lookup", "batch", "cycle"])
    p.add_argument("--seconds", type=int, default=15)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--out", type=Path, help="write the report here (and FILE.collapsed)")
    a = p.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="keystore-profile-"))
    db = open_db(a.backend, workdir)
    try:
        load_rows(db, 10_000, progress=lambda m: print(m, file=sys.stderr))
        svc = Service(db.url, workdir / "server.log", a.workers).start()
        try:
            loadgen.wrk(svc.url, a.mode, db.token, "warm", seconds=2, connections=a.connections,
                        key_range=10_000)
            result = {}
            load = threading.Thread(target=lambda: result.update(run=loadgen.wrk(
                svc.url, a.mode, db.token, "prof", seconds=a.seconds + 4,
                connections=a.connections, key_range=10_000)))
            load.start()
            raw = record(svc.worker_pids(), a.seconds, workdir)
            load.join()
        finally:
            svc.stop()
    finally:
        db.close()
    run = result.get("run")
    head = (f"profile: {a.backend}, {a.mode}, {a.workers} workers, wrk -c{a.connections}: "
            f"{run.rps:.0f} req/s under py-spy\n" if run else "")
    text = head + summarize(raw)
    if a.out:
        a.out.write_text(text)
        a.out.with_suffix(".collapsed").write_text(raw)
    print(text)


if __name__ == "__main__":
    main()
