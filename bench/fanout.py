"""What routing to several destinations costs (docs/benchmarks.md, "Several destinations";
issue 29):

    python -m bench fanout --backend postgres [--rounds 3] [--events 2000]
    python -m bench fanout --backend sqlite --smoke     # a short run, nothing written

--events signed events are accepted while no relay runs, then the relays of a `keystore
serve` drain them to no-op sinks; forwards per second from the first arrival at any sink to
the last. Two sources, alternating round by round: "one" (one destination) and "three"
(three destinations, each its own sink process, every event a delivery to each: three
forwards an event). The target: three's forwards per second at least 0.8 of one's (routing
adds little beyond the extra forwards). Writes bench/results/fanout-<backend>-<date>.json
and docs/img/benchmarks-fanout.png (--smoke writes nothing, and exits 1 unless every
forward was made).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import report
from .common import ROOT, SECRET, median
from .gateway import Sink, _scratch
from .ordering import RELAY_ON, _queue, _revision
from .recovery import _api, _wait_for_keys
from .servers import Service

VARIANTS = ("one", "three")
TARGET = 0.8  # the issue's: three destinations' forwards/s over one's


def _source(svc: Service, db, name: str, sinks: list[Sink]) -> str:
    """A generic HMAC source (as bench/ordering.py's) with a destination per sink."""
    made = _api(svc, db.operator_token, "POST", "/v1/sources", {
        "name": name, "provider": "generic", "secrets": [SECRET],
        "signature": {"header": "X-Signature", "algorithm": "sha256", "encoding": "hex",
                      "prefix": "sha256="},
        "event_id": {"header": "X-Event-Id"}, "max_in_flight": 64,
        "destinations": [{"name": f"d{n}", "url": f"{s.url}/{name}"}
                         for n, s in enumerate(sinks)]})
    return made["source"]["ingest_url"].rsplit("/", 1)[1]


def drain(db, workdir: Path, a, sinks: list[Sink], ingest_id: str, prefix: str) -> dict:
    events = [f"{prefix}-k{i}-{i}" for i in range(a.events)]
    accepted, failed = _queue(db, workdir, a, ingest_id, events)
    for s in sinks:
        s.clear()
    svc = Service(db.url, workdir / "drain.log", a.workers, env=RELAY_ON,
                  source=a.source).start()
    try:
        seen = [_wait_for_keys(s, set(accepted), a.timeout) for s in sinks]
    finally:
        svc.stop()
    times = sorted(t[k] for _, t in seen for k in accepted if k in t)
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return {"accepted": len(accepted), "not_accepted": failed, "forwards": len(times),
            "expected": len(accepted) * len(sinks),
            "forwards_per_s": len(times) / span if span else 0.0,
            "timed_out": not all(done for done, _ in seen)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["sqlite", "postgres"], required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--events", type=int, default=2000, help="queued for each drain")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=180, help="s, for one drain")
    p.add_argument("--source", type=Path, help="run keystore_service from this tree")
    p.add_argument("--smoke", action="store_true", help="one short round, nothing written")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    p.add_argument("--chart", type=Path, default=ROOT / "docs" / "img")
    a = p.parse_args()
    if a.smoke:
        a.rounds, a.events, a.workers = 1, 200, 1
    started = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:5.0f} s] {text}", flush=True)
    result: dict = {"backend": a.backend, "date": time.strftime("%Y-%m-%d %H:%M"),
                    "command": f"python -m bench fanout --backend {a.backend} --rounds "
                               f"{a.rounds} --events {a.events} --workers {a.workers}"
                               + (f" --source {a.source}" if a.source else ""),
                    "revision": _revision(a.source)}
    with _scratch(a) as (workdir, db, sink):
        more = [Sink(), Sink()]
        try:
            sinks = {"one": [sink], "three": [sink, *more]}
            svc = Service(db.url, workdir / "setup.log", 1, source=a.source).start()
            try:
                ids = {v: _source(svc, db, f"fan-{v}", sinks[v]) for v in VARIANTS}
            finally:
                svc.stop()
            runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
            for r in range(a.rounds):
                for v in VARIANTS[r % 2:] + VARIANTS[:r % 2]:  # neither always first
                    got = drain(db, workdir, a, sinks[v], ids[v], f"f{r}{v}")
                    runs[v].append(got)
                    say(f"round {r + 1} {v:5s}: {got['forwards_per_s']:7.1f} forwards/s "
                        f"({got['forwards']} of {got['expected']})"
                        + ("  (TIMED OUT)" if got["timed_out"] else ""))
        finally:
            for s in more:
                s.stop()
    for v, got in runs.items():
        result[v] = {"forwards_per_s": round(median([x["forwards_per_s"] for x in got]), 1),
                     "runs": [round(x["forwards_per_s"], 1) for x in got],
                     "missing": sum(x["expected"] - x["forwards"] for x in got),
                     "not_accepted": sum(x["not_accepted"] for x in got)}
    one = result["one"]["forwards_per_s"]
    result["three_vs_one"] = round(result["three"]["forwards_per_s"] / one, 3) if one else None
    result["target"] = TARGET
    print(json.dumps({k: result[k] for k in ("one", "three", "three_vs_one")}, indent=1))
    complete = all(result[v]["missing"] == result[v]["not_accepted"] == 0 for v in VARIANTS)
    if a.smoke:
        return 0 if complete else 1
    a.out.mkdir(parents=True, exist_ok=True)
    tag = f"-{result['revision']}" if a.source else ""
    out = a.out / f"fanout-{a.backend}-{time.strftime('%Y-%m-%d')}{tag}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    _chart(a.out, a.chart / "benchmarks-fanout.png")
    return 0 if complete else 1


def _chart(results: Path, path: Path) -> None:
    plt = report.pyplot()
    found = report.todays(results, "fanout", time.strftime("%Y-%m-%d"))
    if plt is None or not found:
        return
    with report.figure(plt, path, figsize=(6, 3.8), dpi=100) as (fig, ax):
        width = 0.8 / len(found)
        for n, (backend, r) in enumerate(found.items()):
            bars = ax.bar([x + n * width for x in range(2)],
                          [r[v]["forwards_per_s"] for v in VARIANTS], width,
                          label=f"{report.NAMES[backend]} ({r['three_vs_one']:.2f}x)")
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_xticks([x + width * (len(found) - 1) / 2 for x in range(2)],
                      ["1 destination", "3 destinations"], fontsize=8)
        ax.set_ylabel("forwards per second (all destinations)")
        ax.set_title(f"draining a queue to no-op sinks (target: 3 >= {TARGET} x 1)",
                     fontsize=10)
        ax.legend(fontsize=8)


if __name__ == "__main__":
    sys.exit(main())
