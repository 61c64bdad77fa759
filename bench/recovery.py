"""What the alerts' watchers and the recovery after an outage cost (docs/benchmarks.md,
"Alerts and recovery"; issue 27):

    python -m bench recovery --backend postgres [--rounds 3] [--seconds 6] [--events 2000]
    python -m bench recovery --backend sqlite --smoke      # CI's few seconds (scripts/test)

1. Alerts off against alerts on, side by side, alternating round by round on one database:
   `keystore serve` with its relays forwarding to a no-op sink while wrk sends new signed
   events at the maximum rate. Off: no alert channel and KEYSTORE_ALERT_WATCH_SECONDS=0.
   On: a webhook channel configured and the watchers looking every --watch seconds (1: five
   times as often as the default) over the bench's source and --sources idle ones. Ingest
   per second (202s) and forwards per second (first arrivals at the sink over the run),
   and on / off as a ratio (target: within 5 %).
2. The drain after an outage: the sink's port closed, --events events accepted and failing
   for --outage seconds, then the sink listens again on the same port; the time from its
   return to the first forward and to the last delivery. "stream": one new event arrives at
   the return, as under a steady stream (its take is the probe); "idle": nothing arrives,
   the source's probe (every 30 s, storage/take.py) finds the destination back.

Writes bench/results/recovery-<backend>-<date>.json and docs/img/benchmarks-recovery.png
(--smoke writes nothing, and exits 1 unless every event was delivered).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from . import loadgen, report
from .common import ROOT, SIGNATURE, median
from .gateway import Sink, _scratch, _send_at_rate, make_source, wait_for
from .servers import Service

# the idle sources' signing secret (Standard Webhooks: whsec_ + base64 of 32 bytes)
IDLE_SECRET = "whsec_aWRsZS1zb3VyY2Utc2VjcmV0LW9mLTMyLWJ5dGVzISE="


def _api(svc: Service, token: str, method: str, path: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(svc.url + path, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read()
    return json.loads(raw) if raw else {}


def _serve(db, workdir: Path, a, watch: float) -> Service:
    return Service(db.url, workdir / "recovery.log", a.workers,
                   env={"KEYSTORE_RELAY_IN_SERVE": "true",
                        "KEYSTORE_ALERT_WATCH_SECONDS": str(watch)}).start()


# --- 1. alerts off / on -------------------------------------------------------------------

def _one_round(db, workdir: Path, a, sink: Sink, ingest_id: str, on: bool, tag: str) -> dict:
    svc = _serve(db, workdir, a, a.watch if on else 0)
    try:
        if on:
            _api(svc, db.operator_token, "POST", "/v1/alert-channels",
                 {"name": "bench", "kind": "webhook", "url": sink.url + "/alerts"})
        sink.clear()
        run = loadgen.wrk(svc.url, "ingest", ingest_id, tag, seconds=a.seconds,
                          connections=16, extra=(SIGNATURE,))
        accepted = run.count(202)
        wait_for(sink, accepted, 120)
        times = sorted(sink.times().values())
        if on:
            _api(svc, db.operator_token, "DELETE", "/v1/alert-channels/bench")
    finally:
        svc.stop()
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return {"ingest_rps": run.rps * accepted / max(run.requests, 1),
            "forwards_per_s": len(times) / span if span else 0.0,
            "accepted": accepted, "forwarded": len(times), "status": dict(run.status)}


def alerts_on_off(db, workdir: Path, a, sink: Sink, ingest_id: str, say) -> dict:
    runs: dict[str, list[dict]] = {"off": [], "on": []}
    for r in range(a.rounds):
        for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):  # neither always first
            got = _one_round(db, workdir, a, sink, ingest_id, mode == "on", f"a{r}{mode}")
            runs[mode].append(got)
            say(f"round {r + 1} alerts {mode:3s}: ingest {got['ingest_rps']:7.1f}/s, "
                f"forwards {got['forwards_per_s']:7.1f}/s ({got['forwarded']} of "
                f"{got['accepted']})")
    out: dict = {"watch_seconds": a.watch, "idle_sources": a.sources}
    for measure in ("ingest_rps", "forwards_per_s"):
        off = median([x[measure] for x in runs["off"]])
        on = median([x[measure] for x in runs["on"]])
        out[measure] = {"off": round(off, 1), "on": round(on, 1),
                        "on_vs_off": round(on / off, 3) if off else None,
                        "runs": {m: [round(x[measure], 1) for x in v]
                                 for m, v in runs.items()}}
    # wrk's last requests can be accepted after it stopped counting: more forwarded than
    # accepted is no loss
    out["not_forwarded"] = sum(max(0, x["accepted"] - x["forwarded"]) for v in runs.values()
                               for x in v)
    return out


# --- 2. the drain after an outage ---------------------------------------------------------

def _sink_at(port: int) -> Sink:
    """The no-op sink again, on a port it had before (a destination coming back)."""
    sink = Sink.__new__(Sink)
    sink.port, sink.url = port, f"http://127.0.0.1:{port}"
    sink.proc = subprocess.Popen([sys.executable, "-m", "bench.gateway", "sink", "--port",
                                  str(port)], cwd=ROOT)
    for _ in range(200):
        try:
            sink.count()
            return sink
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the sink did not start again")


def _wait_for_keys(sink: Sink, keys: set[str], timeout: float) -> tuple[bool, dict]:
    """(whether every key reached the sink in time, what the sink saw)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = sink.times() if sink.count() >= len(keys) else {}
        if keys <= seen.keys() or time.monotonic() >= deadline:
            return keys <= seen.keys(), seen or sink.times()
        time.sleep(0.1)


def outage(db, workdir: Path, a, sink: Sink, ingest_id: str, variant: str, say
           ) -> tuple[dict, Sink]:
    """One outage of a.outage seconds with a.events queued in it; (figures, the sink)."""
    svc = _serve(db, workdir, a, a.watch)
    try:
        sink.stop()  # connection refused from now on
        down = time.monotonic()
        accepted, failed = asyncio.run(_send_at_rate(svc.url, ingest_id, f"o-{variant}",
                                                     1000, a.events / 1000))
        time.sleep(max(0.0, down + a.outage - time.monotonic()))
        sink = _sink_at(sink.port)
        up = time.time()
        if variant == "stream":
            asyncio.run(_send_at_rate(svc.url, ingest_id, f"o-{variant}-next", 1, 1,
                                      connections=1))
        # wait for the outage's own events: the stream variant's next event is one more, so
        # a count alone can be reached with one of them still queued
        done, seen = _wait_for_keys(sink, set(accepted), 120)
    finally:
        svc.stop()
    times = sorted(t for k, t in seen.items() if k in accepted)
    out = {"events": len(accepted), "not_accepted": failed, "delivered": len(times),
           "outage_seconds": a.outage,
           "to_first_s": round(max(0.0, times[0] - up), 2) if times else None,
           "to_last_s": round(times[-1] - up, 2) if times else None,
           "drain_s": round(times[-1] - times[0], 2) if times else None}
    say(f"outage ({variant}): {out['delivered']} of {out['events']} delivered, first "
        f"{out['to_first_s']} s and last {out['to_last_s']} s after the sink's return"
        + ("" if done else "  (TIMED OUT)"))
    sink.clear()
    return out, sink


# --- the run ------------------------------------------------------------------------------

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["sqlite", "postgres"], required=True)
    p.add_argument("--rounds", type=int, default=4, help="of each mode (alerts off / on)")
    p.add_argument("--seconds", type=int, default=6, help="of wrk in each round")
    p.add_argument("--events", type=int, default=2000, help="accepted during the outage")
    p.add_argument("--outage", type=float, default=20.0, help="seconds (at least 5)")
    p.add_argument("--sources", type=int, default=20, help="idle sources the watchers read")
    p.add_argument("--watch", type=float, default=1.0, help="the watchers' interval, s")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="one short round, nothing written")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    p.add_argument("--chart", type=Path, default=ROOT / "docs" / "img")
    a = p.parse_args()
    if a.smoke:
        a.rounds, a.seconds, a.events, a.outage, a.sources, a.workers = 1, 1, 200, 6.0, 2, 1
    started = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:5.0f} s] {text}", flush=True)
    result: dict = {"backend": a.backend, "date": time.strftime("%Y-%m-%d %H:%M"),
                    "command": f"python -m bench recovery --backend {a.backend} --rounds "
                               f"{a.rounds} --seconds {a.seconds} --events {a.events} "
                               f"--outage {a.outage:g} --sources {a.sources} --watch "
                               f"{a.watch:g} --workers {a.workers}"}
    with _scratch(a) as (workdir, db, sink):
        svc = Service(db.url, workdir / "setup.log", 1).start()
        try:
            ingest_id = make_source(svc, db, sink)
            for n in range(a.sources):
                _api(svc, db.operator_token, "POST", "/v1/sources", {
                    "name": f"idle-{n}", "provider": "standard",
                    "secrets": [IDLE_SECRET],
                    "destination": {"url": sink.url + "/idle"}})
        finally:
            svc.stop()
        result["alerts"] = alerts_on_off(db, workdir, a, sink, ingest_id, say)
        result["outage"] = {}
        for variant in (("stream",) if a.smoke else ("stream", "idle")):
            result["outage"][variant], sink = outage(db, workdir, a, sink, ingest_id,
                                                     variant, say)
    _print(result)
    complete = result["alerts"]["not_forwarded"] == 0 and all(
        o["delivered"] == o["events"] > 0 for o in result["outage"].values())
    if a.smoke:
        return 0 if complete else 1
    a.out.mkdir(parents=True, exist_ok=True)
    out = a.out / f"recovery-{a.backend}-{time.strftime('%Y-%m-%d')}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    _chart(a.out, a.chart / "benchmarks-recovery.png")
    return 0 if complete else 1


def _print(result: dict) -> None:
    al = result["alerts"]
    print(f"\n{result['backend']}: alerts on (watch every {al['watch_seconds']:g} s, "
          f"{al['idle_sources']} idle sources) vs off")
    for measure, label in (("ingest_rps", "ingest"), ("forwards_per_s", "forwards")):
        m = al[measure]
        print(f"  {label:8s}: off {m['off']:7.1f}/s  on {m['on']:7.1f}/s  = {m['on_vs_off']}")
    for variant, o in result["outage"].items():
        print(f"  outage {o['outage_seconds']:g} s ({variant}): {o['events']} events, first "
              f"{o['to_first_s']} s, last {o['to_last_s']} s after the return (drain "
              f"{o['drain_s']} s)")


def _chart(results: Path, path: Path) -> None:
    plt = report.pyplot()
    found = report.todays(results, "recovery")
    if plt is None or not found:
        return
    with report.figure(plt, path, ncols=2, figsize=(11, 3.8), dpi=100) as (fig, (ax, ox)):
        labels = ["ingest, off", "ingest, on", "forwards, off", "forwards, on"]
        width = 0.8 / len(found)
        for n, (backend, r) in enumerate(found.items()):
            al = r["alerts"]
            values = [al["ingest_rps"]["off"], al["ingest_rps"]["on"],
                      al["forwards_per_s"]["off"], al["forwards_per_s"]["on"]]
            bars = ax.bar([x + n * width for x in range(4)], values, width,
                          label=report.NAMES[backend])
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_xticks([x + width * (len(found) - 1) / 2 for x in range(4)], labels, fontsize=8)
        ax.set_ylabel("per second")
        ax.set_title("alerts off vs on (a channel, watchers every 1 s)", fontsize=10)
        ax.legend(fontsize=8)
        variants = ["stream", "idle"]
        for n, (backend, r) in enumerate(found.items()):
            values = [r["outage"].get(v, {}).get("to_last_s") or 0 for v in variants]
            bars = ox.bar([x + n * width for x in range(2)], values, width,
                          label=report.NAMES[backend])
            ox.bar_label(bars, fmt="%.1f", fontsize=7)
        ox.axhline(60, color="grey", linestyle=":", linewidth=1, label="60 s (the contract)")
        ox.set_xticks([x + width * (len(found) - 1) / 2 for x in range(2)],
                      ["a new event at the return", "no traffic (the 30 s probe)"], fontsize=8)
        ox.set_ylabel("s, destination back to last delivery")
        ox.set_title("the queue after an outage", fontsize=10)
        ox.legend(fontsize=7)


if __name__ == "__main__":
    sys.exit(main())
