"""Group commit and thread layouts, side by side in one run (docs/benchmarks.md):

    python -m bench layouts --backend postgres [--rounds 3] [--seconds 6]
    python -m bench layouts --backend sqlite --layout off-4x4 --layout on-4x16

A layout is `on|off` (KEYSTORE_GROUP_COMMIT), `+later` for repeats counted later
(KEYSTORE_ASYNC_REPEAT_COUNTS), and workers x threads. Every round starts each
layout in turn on one database and runs the same scenarios against it: the no-op ceiling,
the lookup (one round trip: the reference every figure is a ratio to), claims of new keys
with 16 and with 64 connections, replays, hot keys (64 connections), batches of 1,000. So
each ratio is made of figures taken minutes apart at most, on the same machine. Then the
claims' p99 at half their maximum rate against the no-op's, for the last layout. Writes
bench/results/layouts-<backend>-<date>.json and docs/img/benchmarks-layouts-<backend>.png.
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import tempfile
import time
import urllib.request
from pathlib import Path

from . import loadgen, report
from .databases import load_rows, open_db
from .common import median
from .scenarios import CLOSED
from .servers import Service

ROOT = Path(__file__).resolve().parent.parent
# scenario -> (bench/wrk.lua mode, connections, statuses that count as answered)
SCENARIOS = {
    "noop": ("noop", 16, {200}),
    "lookup": ("lookup", 16, {200}),
    "claim_new": ("claim", 16, {201}),
    "claim_new_64": ("claim", 64, {201}),
    "replay": ("replay", 16, {200}),
    "hot_keys": ("hot", 64, {201, 409}),
    "batch": ("batch", 8, {200}),
}
ROWS = 10_000  # finished records loaded for replays and lookups
assert CLOSED["replay"][0] == "replay" and CLOSED["hot_keys"][0] == "hot"


def parse_layout(text: str) -> tuple[str, bool, int, int]:
    """`on|off[+later]-WxT`: group commit on or off, `+later` repeats counted later
    (KEYSTORE_ASYNC_REPEAT_COUNTS), W workers of T threads."""
    m = re.fullmatch(r"(on|off)(\+later)?-([0-9]{1,3})x([0-9]{1,3})", text)  # ASCII digits
    if not m:
        raise argparse.ArgumentTypeError("a layout is on|off[+later]-WORKERSxTHREADS, "
                                         "e.g. on-4x16")
    return text, m[1] == "on", int(m[3]), int(m[4])


def groups_seen(url: str) -> tuple[float, float]:
    """keystore_claim_groups_total and ..._members_total, summed over the workers."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(rf"^{name} (\S+)$", text, flags=re.M))
    return total("keystore_claim_groups_total"), total("keystore_claim_group_members_total")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["sqlite", "postgres"], required=True)
    p.add_argument("--layout", action="append", type=parse_layout,
                   help="on|off-WORKERSxTHREADS; default: off-4x4 on-4x4 on-2x32 on-4x16")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=6)
    p.add_argument("--rate-seconds", type=int, default=8)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    p.add_argument("--chart", type=Path, default=ROOT / "docs" / "img")
    a = p.parse_args()
    layouts = a.layout or [parse_layout(x) for x in ("off-4x4", "on-4x4", "on-2x32",
                                                     "on-4x16")]
    workdir = Path(tempfile.mkdtemp(prefix="keystore-layouts-"))
    db = open_db(a.backend, workdir)
    runs: dict[str, dict[str, list]] = {name: {s: [] for s in SCENARIOS} for name, *_ in layouts}
    extra: dict[str, dict[str, list]] = {name: {"group": [], "rss_mb": []}
                                         for name, *_ in layouts}
    total = a.rounds * len(layouts) * len(SCENARIOS)
    done, started = 0, time.monotonic()
    try:
        load_rows(db, ROWS, progress=lambda m: print(m, flush=True))
        for r in range(a.rounds):
            for name, on, workers, threads in layouts:
                svc = _start(db, workdir, name, on, workers, threads)
                try:
                    loadgen.wrk(svc.url, "claim", db.token, f"w{name}{r}", seconds=1,
                                connections=16)
                    for s, (mode, conns, ok) in SCENARIOS.items():
                        before = groups_seen(svc.url) if s == "claim_new_64" else None
                        run = loadgen.wrk(svc.url, mode, db.token, f"{name}-{r}-{s}",
                                          seconds=a.seconds, connections=conns,
                                          key_range=ROWS)
                        # statuses the scenario does not expect, socket errors, timeouts
                        bad = sum(n for code, n in run.status.items() if int(code) not in ok) \
                            + sum(v for k, v in run.errors.items() if k != "status")
                        runs[name][s].append({"rps": run.rps, "p99_ms": run.p99_us / 1e3,
                                              "bad": bad})
                        if before is not None:
                            after = groups_seen(svc.url)
                            groups = after[0] - before[0]
                            extra[name]["group"].append(
                                (after[1] - before[1]) / groups if groups else 1.0)
                        done += 1
                        print(f"[{done}/{total} {time.monotonic() - started:5.0f} s] round "
                              f"{r + 1} {name:8s} {s:12s} {run.rps:8.1f}/s  p99 "
                              f"{run.p99_us / 1e3:6.1f} ms  {dict(run.status)}", flush=True)
                    extra[name]["rss_mb"].append(max(svc.worker_rss_mb() or [0.0]))
                finally:
                    svc.stop()
        name, on, workers, threads = layouts[-1]
        svc = _start(db, workdir, name, on, workers, threads)
        try:
            latency = _half_rate(svc, db, median([x["rps"] for x in runs[name]["claim_new"]]),
                                 a.rounds, a.rate_seconds)
        finally:
            svc.stop()
    finally:
        db.close()
    result = _summary(a.backend, layouts, runs, extra, latency, a)
    _print(result)
    a.out.mkdir(parents=True, exist_ok=True)
    out = a.out / f"layouts-{a.backend}-{time.strftime('%Y-%m-%d')}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    _chart(result, a.chart / f"benchmarks-layouts-{a.backend}.png")


def _start(db, workdir: Path, name: str, on: bool, workers: int, threads: int) -> Service:
    env = {"KEYSTORE_GROUP_COMMIT": "true" if on else "false",
           "KEYSTORE_ASYNC_REPEAT_COUNTS": "true" if "+later" in name else "false",
           # a connection per thread at most (pool + as many overflow)
           "KEYSTORE_POOL_SIZE": str(max(8, threads // 2))}
    return Service(db.url, workdir / f"{name}.log", workers, threads, env=env).start()


def _half_rate(svc: Service, db, max_rps: float, rounds: int, seconds: int) -> dict:
    rate = max(1.0, max_rps / 2)
    out: dict[str, list] = {"noop": [], "claim": []}
    for r in range(rounds):
        for mode in out:
            run = loadgen.constant_rate(svc.url, mode, db.token, f"rate-{r}-{mode}",
                                        rate=rate, seconds=seconds)
            out[mode].append(run.p99_us / 1e3)
            print(f"half rate {rate:.0f}/s round {r + 1} {mode:5s} p50 "
                  f"{run.p50_us / 1e3:.1f} ms  p99 {run.p99_us / 1e3:.1f} ms  "
                  f"{dict(run.status)}", flush=True)
    return {"rate": round(rate, 1), "noop_p99_ms": median(out["noop"]),
            "claim_p99_ms": median(out["claim"]),
            "runs": {m: [round(x, 2) for x in v] for m, v in out.items()}}


def _summary(backend, layouts, runs, extra, latency, a) -> dict:
    table = {}
    for name, on, workers, threads in layouts:
        rps = {s: median([x["rps"] for x in v]) for s, v in runs[name].items()}
        row = {"group_commit": on, "workers": workers, "threads": threads,
               "rps": {s: round(v, 1) for s, v in rps.items()},
               "runs": {s: [round(x["rps"], 1) for x in v] for s, v in runs[name].items()},
               "p99_ms": {s: median([x["p99_ms"] for x in v]) for s, v in runs[name].items()},
               "bad": sum(x["bad"] for v in runs[name].values() for x in v),
               "vs_lookup": {s: round(rps[s] / rps["lookup"], 3) for s in
                             ("claim_new", "claim_new_64", "replay", "hot_keys")},
               "vs_noop": {s: round(rps[s] / rps["noop"], 3) for s in
                           ("lookup", "claim_new", "replay")},
               "batch_keys_per_s": round(rps["batch"] * 1000),
               "claims_64_over_16": round(rps["claim_new_64"] / rps["claim_new"], 3),
               "mean_group_at_64": round(median(extra[name]["group"]), 2),
               "worker_rss_mb": round(max(extra[name]["rss_mb"]), 1)}
        table[name] = row
    return {"backend": backend, "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": {"cpus": _cpus(), "python": platform.python_version()},
            "command": f"python -m bench layouts --backend {backend} --rounds {a.rounds} "
                       f"--seconds {a.seconds} " + " ".join(
                           f"--layout {n}" for n, *_ in layouts),
            "layouts": table, "half_rate": {"layout": layouts[-1][0], **latency}}


def _cpus() -> int:
    import os
    return len(os.sched_getaffinity(0))


def _print(result: dict) -> None:
    print(f"\n{result['backend']}: medians of the rounds; ratios to the same layout's lookup")
    print(f"{'layout':10s} {'lookup/s':>9s} {'claims':>7s} {'c64':>6s} {'replay':>7s} "
          f"{'hot':>6s} {'batch k/s':>9s} {'64/16':>6s} {'group':>6s} {'RSS MB':>7s}")
    for name, row in result["layouts"].items():
        v = row["vs_lookup"]
        print(f"{name:10s} {row['rps']['lookup']:9.0f} {v['claim_new']:7.2f} "
              f"{v['claim_new_64']:6.2f} {v['replay']:7.2f} {v['hot_keys']:6.2f} "
              f"{row['batch_keys_per_s'] / 1000:9.1f} {row['claims_64_over_16']:6.2f} "
              f"{row['mean_group_at_64']:6.1f} {row['worker_rss_mb']:7.1f}")
    h = result["half_rate"]
    print(f"half rate ({h['layout']}, {h['rate']}/s): claim p99 {h['claim_p99_ms']:.1f} ms, "
          f"no-op p99 {h['noop_p99_ms']:.1f} ms, ratio "
          f"{h['claim_p99_ms'] / max(h['noop_p99_ms'], 1e-9):.2f}")


def _chart(result: dict, path: Path) -> None:
    plt = report.pyplot()
    if plt is None:
        return
    names = list(result["layouts"])
    shown = [("claim_new", "claims, 16 conn."), ("claim_new_64", "claims, 64 conn."),
             ("replay", "replays"), ("hot_keys", "hot keys, 64 conn.")]
    with report.figure(plt, path, figsize=(8, 3.6), dpi=100) as (fig, ax):
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            values = [result["layouts"][name]["vs_lookup"][s] for s, _ in shown]
            ax.bar([x + i * width for x in range(len(shown))], values, width, label=name)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(shown))],
                      [label for _, label in shown])
        ax.set_ylabel("requests/s ÷ lookup's")
        ax.set_title(f"{result['backend']}: group commit (on/off) and workers x threads")
        ax.legend(fontsize=8, ncols=len(names))


if __name__ == "__main__":
    main()
