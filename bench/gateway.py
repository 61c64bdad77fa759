"""The gateway's speed, side by side in one run (docs/benchmarks.md, "The gateway"):

    python -m bench gateway --backend postgres [--rounds 3] [--seconds 6] [--events 3000]
    python -m bench gateway --backend postgres --latency-at 324 [--rounds 3]  # step 2 alone
    python -m bench.gateway sink --port P        # the no-op destination, its own process

1. Ingest of new signed events (generic HMAC-SHA256 source, a new event id each) against
   claims of new keys, alternating round by round on one service (wrk -c16).
2. Accept-to-first-forward latency at half the maximum ingest rate, then at a quarter: an
   open-loop sender notes when each event was sent and when its 202 arrives, the sink
   when the event's first forward arrives; each round also notes how busy the machine's
   CPUs were (/proc/stat).
3. Forwarding throughput: events queued with no relay running, then drained to the sink by
   the relays of `keystore serve` (one per worker), by one `keystore relay` process, and by
   two; events per second from the first forward to the last, against the ingest rate.

Everything on loopback; the sink answers 200 at once. Writes
bench/results/gateway-<backend>-<date>.json and docs/img/benchmarks-gateway.png (both
backends in one chart when both have a result of the same day).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Optional

from . import loadgen, report
from .common import BODY, ROOT, SECRET, SIGNATURE, median
from .databases import open_db
from .rate import _read_response, percentile
from .servers import BENCH_SECRET_KEY, KEYSTORE, Service, free_port


# --- the sink: a no-op destination that notes when each event first arrives ---------------

class _SinkProtocol(asyncio.Protocol):
    """One connection to the sink: HTTP/1.1 with keep-alive, as a workflow platform's web
    server keeps it, parsed by hand on one event loop. The sink shares the machine with the
    service it measures: http.server (a thread per connection, the email package's header
    parser) spent 0.17-0.18 ms of CPU on each forward, this 0.07 ms (docs/benchmarks.md, "The
    gateway"). POST: note the Idempotency-Key's first arrival, answer 200. GET /count, GET
    /times (JSON {event id: time}), DELETE (forget what was seen)."""

    def __init__(self, seen: dict[str, float]) -> None:
        self.seen, self.buf, self.transport = seen, b"", None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.time()  # when the forward's bytes came in
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buf[:end].decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            size = end + 4 + int(headers.get("content-length") or 0)
            if len(self.buf) < size:
                return
            self.buf = self.buf[size:]
            method, path = (lines[0].split(" ") + ["", ""])[:2]
            self.transport.write(self._answer(method, path, headers, now))
            if headers.get("connection", "").lower() == "close":
                self.transport.close()
                return

    def _answer(self, method: str, path: str, headers: dict, now: float) -> bytes:
        body = b""
        if method == "POST":
            self.seen.setdefault(headers.get("idempotency-key", ""), now)
        elif method == "GET":
            body = json.dumps(len(self.seen) if path == "/count" else self.seen).encode()
        elif method == "DELETE":
            self.seen.clear()
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


async def sink_server(port: int, start_serving: bool = True) -> asyncio.Server:
    """The sink's listening socket on 127.0.0.1. The relays open their pooled connections at
    once: with a listen backlog of 5 (http.server's) the kernel dropped SYNs and the client
    sent them again after 1 s (events at ~1.0 s in p99); 128 holds them."""
    sock = socket.create_server(("127.0.0.1", port), backlog=128)  # listening from now on
    seen: dict[str, float] = {}
    return await asyncio.get_running_loop().create_server(
        lambda: _SinkProtocol(seen), sock=sock, backlog=128, start_serving=start_serving)


def sink_main(port: int) -> None:
    async def run() -> None:
        server = await sink_server(port)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        async with server:
            await stop.wait()
    asyncio.run(run())


class Sink:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.gateway", "sink", "--port",
                                      str(self.port)], cwd=ROOT)
        for _ in range(100):
            try:
                self.count()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the sink did not start")

    def count(self) -> int:
        with urllib.request.urlopen(self.url + "/count", timeout=5) as r:
            return json.loads(r.read())

    def times(self) -> dict[str, float]:
        with urllib.request.urlopen(self.url + "/times", timeout=30) as r:
            return json.loads(r.read())

    def clear(self) -> None:
        urllib.request.urlopen(urllib.request.Request(self.url + "/", method="DELETE"),
                               timeout=5).close()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


# --- the source, and ingest at a constant rate ------------------------------------------

@contextlib.contextmanager
def _scratch(a):
    """A scratch directory, an empty database of `a.backend` and a no-op sink for one run."""
    workdir = Path(tempfile.mkdtemp(prefix="keystore-gateway-"))
    db = open_db(a.backend, workdir)
    try:
        sink = Sink()
        try:
            yield workdir, db, sink
        finally:
            sink.stop()
    finally:
        db.close()


def make_source(svc: Service, db, sink: Sink) -> str:
    body = json.dumps({
        "name": "bench-gateway", "provider": "generic", "secrets": [SECRET],
        "signature": {"header": "X-Signature", "algorithm": "sha256", "encoding": "hex",
                      "prefix": "sha256="},
        "event_id": {"header": "X-Event-Id"}, "max_in_flight": 64,
        "destination": {"url": sink.url + "/hook"}}).encode()
    req = urllib.request.Request(svc.url + "/v1/sources", data=body, method="POST", headers={
        "Authorization": f"Bearer {db.operator_token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())["source"]["ingest_url"].rsplit("/", 1)[1]


def ingest_request(host: str, ingest_id: str, event_id: str) -> bytes:
    head = (f"POST /hooks/{ingest_id} HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nX-Event-Id: {event_id}\r\n"
            f"X-Signature: {SIGNATURE}\r\nContent-Length: {len(BODY)}\r\n\r\n")
    return head.encode() + BODY.encode()


async def _send_at_rate(url: str, ingest_id: str, prefix: str, rate: float, seconds: float,
                        connections: int = 16, sent: Optional[dict[str, float]] = None
                        ) -> tuple[dict[str, float], int]:
    """Open loop: event i is due at t0 + i / rate. Returns {event id: when its 202 came}
    and how many were not accepted; `sent` (if given) gets when each was sent."""
    host, port = url.split("//", 1)[1].split(":")
    total = int(rate * seconds)
    accepted: dict[str, float] = {}
    failed = 0
    t0 = time.perf_counter() + 0.1

    async def conn(n: int) -> None:
        nonlocal failed
        reader = writer = None
        for i in range(n, total, connections):
            pause = t0 + i / rate - time.perf_counter()
            if pause > 0:
                await asyncio.sleep(pause)
            event = f"{prefix}-{i}"
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(host, int(port))
                if sent is not None:
                    sent[event] = time.time()
                writer.write(ingest_request(f"{host}:{port}", ingest_id, event))
                code = await asyncio.wait_for(_read_response(reader), 30)
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                failed += 1
                if writer is not None:
                    writer.close()
                reader = writer = None
                continue
            if code == 202:
                accepted[event] = time.time()
            else:
                failed += 1
        if writer is not None:
            writer.close()
    await asyncio.gather(*(conn(n) for n in range(connections)))
    return accepted, failed


def wait_for(sink: Sink, n: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sink.count() >= n:
            return True
        time.sleep(0.05)
    return False


# --- the run --------------------------------------------------------------------------

def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "sink":
        p = argparse.ArgumentParser()
        p.add_argument("sink")
        p.add_argument("--port", type=int, required=True)
        sink_main(p.parse_args().port)
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["sqlite", "postgres"], required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=6)
    p.add_argument("--rate-seconds", type=int, default=8)
    p.add_argument("--events", type=int, default=3000, help="queued for each drain")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    p.add_argument("--chart", type=Path, default=ROOT / "docs" / "img")
    p.add_argument("--idle-only", action="store_true",
                   help="only the pick-up on an idle system (20 events, 5 a second)")
    p.add_argument("--latency-at", type=float, metavar="RATE",
                   help="only step 2, at RATE events a second (nothing written)")
    a = p.parse_args()
    if a.latency_at:
        latency_only(a)
        return
    if a.idle_only:
        idle_pickup(a)
        return
    with _scratch(a) as (workdir, db, sink):
        started = time.monotonic()

        def say(text: str) -> None:
            print(f"[{time.monotonic() - started:5.0f} s] {text}", flush=True)
        result: dict = {"backend": a.backend, "date": time.strftime("%Y-%m-%d %H:%M"),
                        "command": f"python -m bench gateway --backend {a.backend} --rounds "
                                   f"{a.rounds} --seconds {a.seconds} --events {a.events}"}
        # 1. ingest against claims, relays off (the events stay queued)
        svc = Service(db.url, workdir / "ingest.log", a.workers).start()
        try:
            ingest_id = make_source(svc, db, sink)
            loadgen.wrk(svc.url, "claim", db.token, "warm", seconds=1, connections=16)
            runs: dict[str, list[float]] = {"claim_new": [], "ingest": []}
            for r in range(a.rounds):
                for name, mode, token in (("claim_new", "claim", db.token),
                                          ("ingest", "ingest", ingest_id)):
                    run = loadgen.wrk(svc.url, mode, token, f"r{r}", seconds=a.seconds,
                                      connections=16, extra=(SIGNATURE,))
                    ok = run.count(202 if mode == "ingest" else 201)
                    bad = run.requests - ok
                    runs[name].append(run.rps)
                    say(f"round {r + 1} {name:9s} {run.rps:8.1f}/s p99 "
                        f"{run.p99_us / 1e3:6.1f} ms  {dict(run.status)}"
                        + (f"  {bad} not accepted" if bad else ""))
            ingest_rps = median(runs["ingest"])
            result["ingest"] = {
                "claim_new_rps": round(median(runs["claim_new"]), 1),
                "ingest_rps": round(ingest_rps, 1),
                "ratio": round(ingest_rps / median(runs["claim_new"]), 3),
                "runs": {k: [round(x, 1) for x in v] for k, v in runs.items()}}
        finally:
            svc.stop()

        # 2. accept-to-first-forward at half the maximum ingest rate, serve's relays on (the
        # target), and at a quarter of it: how the latency grows with the machine's load
        result["latency"] = latency(db, workdir, sink, ingest_id, ingest_rps / 2, a, say)
        result["latency_quarter"] = latency(db, workdir, sink, ingest_id, ingest_rps / 4, a,
                                            say, name="quarter")

        # 3. forwarding throughput: queue events with no relay, then drain them
        drains: dict[str, list[float]] = {"serve": [], "relay x1": [], "relay x2": []}
        for r in range(a.rounds):
            for name in drains:
                queued = _queue(db, workdir, a, ingest_id, f"d{r}{name[-1]}", say)
                sink.clear()
                procs = _relays(name, db, workdir, a.workers)
                try:
                    t0 = time.time()
                    done = wait_for(sink, queued, 300)
                    times = sorted(sink.times().values())
                finally:
                    for proc in procs:
                        _stop(proc)
                span = (times[-1] - min(times[0], t0)) if times else 0.0
                eps = len(times) / span if span > 0 else 0.0
                drains[name].append(eps)
                say(f"round {r + 1} drain by {name:8s}: {len(times)} of {queued} in "
                    f"{span:.2f} s = {eps:.0f} events/s" + ("" if done else "  (TIMED OUT)"))
        result["forwarding"] = {
            name: {"events_per_s": round(median(v), 1),
                   "vs_ingest": round(median(v) / ingest_rps, 3),
                   "runs": [round(x, 1) for x in v]} for name, v in drains.items()}
    _print(result)
    a.out.mkdir(parents=True, exist_ok=True)
    out = a.out / f"gateway-{a.backend}-{time.strftime('%Y-%m-%d')}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    _chart(a.out, a.chart / "benchmarks-gateway.png")


def latency(db, workdir: Path, sink: Sink, ingest_id: str, rate: float, a, say,
            name: str = "half") -> dict:
    """Accept-to-first-forward at `rate` events a second for a.rate_seconds, a.rounds
    times, to the relays of a `keystore serve` (what earlier steps left queued goes first).
    Also from each event's send to its first forward: the 202 is read by a sender that
    waits for a CPU too, so this one (which includes the ingest itself) bounds the other
    from above. `name` keeps the event ids of one call apart from another's (else:
    duplicates)."""
    svc = Service(db.url, workdir / "latency.log", a.workers,
                  env={"KEYSTORE_RELAY_IN_SERVE": "true"}).start()
    try:
        _drain_queue(sink, db, svc, say)
        latencies: list[float] = []
        from_send: list[float] = []
        lost = not_accepted = 0
        busy: list[float] = []
        for r in range(a.rounds):
            sink.clear()
            before = _cpu_times()
            sent: dict[str, float] = {}
            accepted, failed = asyncio.run(_send_at_rate(
                svc.url, ingest_id, f"lat-{name}-{r}", rate, a.rate_seconds, sent=sent))
            busy.append(_busy(before, _cpu_times()))
            wait_for(sink, len(accepted), 60)
            seen = sink.times()
            got = [seen[k] - t for k, t in accepted.items() if k in seen]
            from_send += [seen[k] - sent[k] for k in accepted if k in seen]
            lost += len(accepted) - len(got)
            not_accepted += failed
            latencies += got
            p = sorted(got)
            say(f"round {r + 1} latency at {rate:.0f}/s: {len(accepted)} accepted "
                f"({failed} not), p50 {percentile(p, 50) * 1e3:.1f} ms, p99 "
                f"{percentile(p, 99) * 1e3:.1f} ms, CPUs {busy[-1]:.0%} busy")
    finally:
        svc.stop()
    lat, lat_sent = sorted(latencies), sorted(from_send)
    return {"rate": round(rate, 1), "events": len(lat),
            "p50_ms": round(percentile(lat, 50) * 1e3, 1),
            "p99_ms": round(percentile(lat, 99) * 1e3, 1),
            "from_send_p50_ms": round(percentile(lat_sent, 50) * 1e3, 1),
            "from_send_p99_ms": round(percentile(lat_sent, 99) * 1e3, 1),
            "never_forwarded": lost, "not_accepted": not_accepted,
            "cpu_busy": round(median(busy), 3)}


def _cpu_times() -> tuple[int, int]:
    """(busy, all) jiffies of every CPU of the machine so far, from /proc/stat."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle and iowait
    return sum(values) - idle, sum(values)


def _busy(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of the machine's CPU time that was busy between two _cpu_times()."""
    spent = after[1] - before[1]
    return (after[0] - before[0]) / spent if spent else 0.0


def latency_only(a) -> None:
    """--latency-at RATE: step 2 alone at a given rate, to compare two versions of the code
    one after the other in the same hour (nothing is written)."""
    started = time.monotonic()
    with _scratch(a) as (workdir, db, sink):
        svc = Service(db.url, workdir / "source.log", a.workers).start()
        try:
            ingest_id = make_source(svc, db, sink)
        finally:
            svc.stop()
        out = latency(db, workdir, sink, ingest_id, a.latency_at, a,
                      lambda text: print(f"[{time.monotonic() - started:5.0f} s] {text}",
                                         flush=True))
    print(f"{a.backend}: accept-to-first-forward at {out['rate']:.0f}/s: p50 {out['p50_ms']} "
          f"ms, p99 {out['p99_ms']} ms (from the send: {out['from_send_p50_ms']} / "
          f"{out['from_send_p99_ms']} ms; {out['never_forwarded']} never forwarded), CPUs "
          f"{out['cpu_busy']:.0%} busy")
    if not out["events"] or out["never_forwarded"] or out["not_accepted"]:
        sys.exit(1)  # CI's smoke run (scripts/test): every event accepted and forwarded


def idle_pickup(a) -> dict:
    """Accept-to-first-forward on an idle system: 20 events, one every 200 ms, to serve's
    relays (the contract: picked up within 100 ms, by a wake-up and not by the 1 s sweep)."""
    with _scratch(a) as (workdir, db, sink):
        svc = Service(db.url, workdir / "idle.log", a.workers,
                      env={"KEYSTORE_RELAY_IN_SERVE": "true"}).start()
        try:
            ingest_id = make_source(svc, db, sink)
            time.sleep(1)
            accepted, failed = asyncio.run(_send_at_rate(svc.url, ingest_id, "idle", 5, 4,
                                                         connections=1))
            wait_for(sink, len(accepted), 30)
            seen = sink.times()
        finally:
            svc.stop()
    got = sorted(seen[k] - t for k, t in accepted.items() if k in seen)
    out = {"events": len(got), "p50_ms": round(percentile(got, 50) * 1e3, 1),
           "max_ms": round(got[-1] * 1e3, 1) if got else None,
           "not_forwarded": len(accepted) - len(got), "not_accepted": failed}
    print(f"{a.backend}: idle pick-up, {out['events']} events one every 200 ms: p50 "
          f"{out['p50_ms']} ms, max {out['max_ms']} ms")
    return out


def _queue(db, workdir: Path, a, ingest_id: str, prefix: str, say) -> int:
    """Ingest `a.events` new events with no relay running; returns how many were accepted."""
    svc = Service(db.url, workdir / "queue.log", a.workers).start()
    try:
        accepted, failed = asyncio.run(_send_at_rate(svc.url, ingest_id, prefix, 2000,
                                                     a.events / 2000))
    finally:
        svc.stop()
    if failed:
        say(f"  queueing: {failed} deliveries not accepted")
    return len(accepted)


def _drain_queue(sink: Sink, db, svc: Service, say) -> None:
    """Let the running relays forward what earlier steps left queued."""
    last, still = -1, 0
    while still < 10:  # 10 x 0.2 s without a new forward: drained
        n = sink.count()
        still = still + 1 if n == last else 0
        last = n
        time.sleep(0.2)
    say(f"drained {last} events left queued by earlier steps")


def _relays(name: str, db, workdir: Path, workers: int) -> list:
    env = {**os.environ, "KEYSTORE_DATABASE_URL": db.url, "KEYSTORE_LOG_LEVEL": "WARNING",
           "KEYSTORE_SECRET_KEY": BENCH_SECRET_KEY, "KEYSTORE_SWEEP_INTERVAL_SECONDS": "0",
           "KEYSTORE_RECONCILE_INTERVAL_SECONDS": "0"}
    log = open(workdir / "relay.log", "ab")
    if name == "serve":
        svc = Service(db.url, workdir / "drain.log", workers,
                      env={"KEYSTORE_RELAY_IN_SERVE": "true"})
        svc.start()
        return [svc]
    return [subprocess.Popen([KEYSTORE, "relay", "--progress", "0"], env=env, stdout=log,
                             stderr=log, start_new_session=True)
            for _ in range(int(name[-1]))]


def _stop(proc) -> None:
    if isinstance(proc, Service):
        proc.stop()
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def _print(result: dict) -> None:
    i = result["ingest"]
    print(f"\n{result['backend']}: ingest {i['ingest_rps']:.0f}/s vs claims "
          f"{i['claim_new_rps']:.0f}/s = {i['ratio']:.2f}")
    for step in ("latency", "latency_quarter"):
        lat = result[step]
        print(f"  accept-to-first-forward at {lat['rate']:.0f}/s: p50 {lat['p50_ms']} ms, "
              f"p99 {lat['p99_ms']} ms (from the send {lat['from_send_p50_ms']} / "
              f"{lat['from_send_p99_ms']} ms; {lat['events']} events, "
              f"{lat['never_forwarded']} never forwarded, {lat['not_accepted']} not accepted), "
              f"CPUs {lat['cpu_busy']:.0%} busy")
    for name, f in result["forwarding"].items():
        print(f"  drained by {name:8s}: {f['events_per_s']:7.0f} events/s = "
              f"{f['vs_ingest']:.2f} of the ingest rate")


def _chart(results: Path, path: Path) -> None:
    plt = report.pyplot()
    found = report.todays(results, "gateway")
    if plt is None or not found:
        return
    labels = ["claims", "ingest", "drain: serve", "drain: 1 relay", "drain: 2 relays"]
    with report.figure(plt, path, ncols=2, figsize=(11, 3.8), dpi=100,
                       gridspec_kw={"width_ratios": [5, 3]}) as (fig, (ax, lx)):
        width = 0.8 / len(found)
        for n, (backend, r) in enumerate(found.items()):
            f = r["forwarding"]
            values = [r["ingest"]["claim_new_rps"], r["ingest"]["ingest_rps"],
                      f["serve"]["events_per_s"], f["relay x1"]["events_per_s"],
                      f["relay x2"]["events_per_s"]]
            ax.bar([x + n * width for x in range(len(labels))], values, width,
                   label=report.NAMES[backend])
        ax.set_xticks([x + width * (len(found) - 1) / 2 for x in range(len(labels))], labels)
        ax.set_ylabel("per second")
        ax.set_title("ingest of signed events, and forwarding to a no-op sink", fontsize=10)
        ax.legend()
        # accept-to-first-forward, p50 and p99, at a quarter and at half the maximum ingest rate
        spots = [(pct, step) for pct in ("p50", "p99") for step in ("latency_quarter", "latency")]
        for n, (backend, r) in enumerate(found.items()):
            values = [r[step][f"{pct}_ms"] if step in r else 0 for pct, step in spots]
            bars = lx.bar([x + n * width for x in range(len(spots))], values, width,
                          label=report.NAMES[backend])
            lx.bar_label(bars, fmt="%.0f", fontsize=7)
        lx.axhline(20, color="grey", linestyle=":", linewidth=1, label="20 ms (p50 target)")
        lx.set_xticks([x + width * (len(found) - 1) / 2 for x in range(len(spots))],
                      [f"{pct}\n{'1/4' if step == 'latency_quarter' else '1/2'} rate"
                       for pct, step in spots], fontsize=8)
        lx.legend(fontsize=7)
        lx.set_ylabel("ms, accept to first forward")
        lx.set_title("latency at a quarter and half the ingest rate", fontsize=10)


if __name__ == "__main__":
    main()
