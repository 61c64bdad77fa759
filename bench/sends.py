"""Outbound sends beside the gateway's forwards, in one run (docs/benchmarks.md, "Sends";
issue 28):

    python -m bench sends --backend postgres [--rounds 3] [--events 2000] [--workers 2]
    python -m bench sends --backend sqlite --smoke       # CI's few seconds, nothing written
    python -m bench.sends api --port P                    # the no-op API, its own process

Each round, alternating which goes first, on one database and one no-op API:
1. forwards: --events signed events ingested with no relay running, then drained by the
   relays of `keystore serve` (--workers, one relay each) to the API;
2. sends: --events `POST /v1/send` (wait_seconds 0: 202, queued) with no relay running,
   then drained the same way to a connection that dedupes on `Idempotency-Key`;
3. sends settled by a check: the same to a connection without an idempotency header whose
   API answers 500 to each send (an unknown outcome), so each send is followed at once by
   its check (`GET /invoices?reference=...`), which finds the invoice.
Per second from the first request at the API to the last (forwards and sends: their POSTs;
checked sends: their checks, the last step of each). Sends against forwards is the ratio
(target >= 0.8); a check's cost is 1/checked - 1/sends, in ms of the drain per send.

Writes bench/results/sends-<backend>-<date>.json and docs/img/benchmarks-sends.png (both
backends when both have a result of the day); --smoke writes nothing and exits 1 unless
every forward, send and check reached the API.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from . import report
from .common import ROOT, median
from .databases import open_db
from .gateway import _relays, _send_at_rate, _stop, make_source
from .servers import Service, free_port

# --- the no-op API, its own process ----------------------------------------------------------


class _ApiProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive parsed by hand on one event loop, as bench.gateway's sink (which
    costs the shared CPUs far less than http.server). A POST notes its key's first arrival
    (the Idempotency-Key, else the path) and answers 201 {"id"}, or 500 under /lost/ (its
    outcome unknown to the sender); GET /invoices?reference=R notes R and answers it found;
    GET /count, /checks, /times, /check-times; DELETE forgets."""

    def __init__(self, seen: dict, checks: dict) -> None:
        self.seen, self.checks, self.buf, self.transport = seen, checks, b"", None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.time()
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

    def _answer(self, method: str, path: str, headers: dict, now: float) -> bytes:
        status, body = 200, b""
        split = urlsplit(path)
        if method == "POST":
            key = headers.get("idempotency-key") or split.path
            self.seen.setdefault(key, now)
            status, body = (500, b'{"error":"lost"}') if split.path.startswith("/lost/") else (
                201, json.dumps({"id": f"in_{len(self.seen)}"}).encode())
        elif method == "GET" and split.path.endswith("/invoices"):
            reference = dict(parse_qsl(split.query)).get("reference", "")
            self.checks.setdefault(reference, now)
            body = json.dumps({"data": [{"id": "in_" + reference}]}).encode()
        elif method == "GET":
            body = json.dumps({"/count": len(self.seen), "/checks": len(self.checks),
                               "/times": self.seen, "/check-times": self.checks}.get(
                split.path, None)).encode()
        elif method == "DELETE":
            self.seen.clear()
            self.checks.clear()
        reason = {200: "OK", 201: "Created", 500: "Internal Server Error"}[status]
        return b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d" \
               b"\r\n\r\n%s" % (status, reason.encode(), len(body), body)


def api_main(port: int) -> None:
    async def run() -> None:
        sock = socket.create_server(("127.0.0.1", port), backlog=128)  # see bench.gateway
        seen: dict = {}
        checks: dict = {}
        server = await asyncio.get_running_loop().create_server(
            lambda: _ApiProtocol(seen, checks), sock=sock, backlog=128)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        async with server:
            await stop.wait()
    asyncio.run(run())


class Api:
    """The no-op API in a process of its own (so that it does not share the harness's GIL)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.sends", "api", "--port",
                                      str(self.port)], cwd=ROOT)
        for _ in range(100):
            try:
                self.get("/count")
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the no-op API did not start")

    def get(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return json.loads(r.read())

    def count(self) -> int:  # what bench.gateway.wait_for reads
        return self.get("/count")

    def clear(self) -> None:
        urllib.request.urlopen(urllib.request.Request(self.url + "/", method="DELETE"),
                               timeout=5).close()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


# --- connections, and sends queued ------------------------------------------------------------

def _call(url: str, token: str, method: str, path: str, body: dict | None = None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


CHECK = {"method": "GET", "path": "/invoices?reference={reference}",
         "found": {"pointer": "/data/0"}, "resource_id": "/data/0/id", "absent": "/data"}


def make_connections(svc: Service, db, api: Api) -> None:
    """`bench` dedupes on Idempotency-Key; `bench-check` has no such header, and a check."""
    common = {"base_url": api.url, "headers": {"Authorization": "Bearer bench-api-token"},
              "timeout_seconds": 10, "max_in_flight": 64}
    for body in ({"name": "bench", "idempotency_header": "Idempotency-Key", **common},
                 {"name": "bench-check", "idempotency_header": None, "check": CHECK,
                  **common}):
        status, answer = _call(svc.url, db.operator_token, "POST", "/v1/connections", body)
        if status != 201:
            raise RuntimeError(f"POST /v1/connections: {status} {answer}")


def _queue_sends(svc: Service, db, a, connection: str, prefix: str, say) -> int:
    """`a.events` sends queued (202) through `svc` (no relay); how many were accepted."""
    lost = connection == "bench-check"

    def one(n: int) -> bool:
        key = f"{prefix}-{n}"
        status, answer = _call(svc.url, db.token, "POST", "/v1/send", {
            "scope": "bench-sends", "key": key, "payload": {"n": n},
            "connection": connection, "wait_seconds": 0, "resource_id_pointer": "/id",
            "request": {"method": "POST", "path": f"/lost/{key}" if lost else "/invoices",
                        "json": {"reference": key, "amount": 1250}}})
        return status == 202
    with ThreadPoolExecutor(16) as pool:
        accepted = sum(pool.map(one, range(a.events)))
    if accepted < a.events:
        say(f"  queueing sends: {a.events - accepted} not accepted")
    return accepted


def _queue_events(svc: Service, a, ingest_id: str, prefix: str, say) -> int:
    """`a.events` signed events ingested through `svc` (no relay); how many were accepted."""
    accepted, failed = asyncio.run(_send_at_rate(svc.url, ingest_id, prefix, 2000,
                                                 a.events / 2000))
    if failed:
        say(f"  queueing events: {failed} not accepted")
    return len(accepted)


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU the processes have used so far (/proc/<pid>/stat)."""
    ticks = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            pass
    return ticks / os.sysconf("SC_CLK_TCK")


def _drain(api: Api, db, workdir: Path, a, queued: int, what: str) -> dict:
    """Start serve's relays: per second from the first request to the last, how many
    reached the API (POSTs, or the checks for `what` "checked"), and the CPU ms the
    service's workers spent per item meanwhile (from their readiness: what the relays did
    while serve started is not counted)."""
    api.clear()
    procs = _relays("serve", db, workdir, a.workers)
    count, path = ("/checks", "/check-times") if what == "checked" else ("/count", "/times")
    try:
        pids = procs[0].worker_pids()
        t0, cpu0 = time.time(), _cpu_seconds(pids)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and api.get(count) < queued:
            time.sleep(0.05)
        cpu = _cpu_seconds(pids) - cpu0
        times = sorted(api.get(path).values())
    finally:
        for proc in procs:
            _stop(proc)
    span = (times[-1] - min(times[0], t0)) if times else 0.0
    after = sum(1 for t in times if t >= t0)
    return {"per_s": len(times) / span if span > 0 else 0.0, "queued": queued,
            "reached": len(times), "cpu_ms": 1e3 * cpu / after if after else None}


def one_round(r: int, svc: Service, api: Api, db, workdir: Path, a, ingest_id: str,
              say) -> dict:
    """Each kind queued through `svc` (serve without relays, up for the whole run), then
    drained by a serve with relays of its own."""
    order = ["forwards", "sends", "checked"]
    if r % 2:
        order.reverse()  # neither always first
    got = {}
    for what in order:
        tag = f"r{r}{what[0]}"
        if what == "forwards":
            queued = _queue_events(svc, a, ingest_id, tag, say)
        else:
            queued = _queue_sends(svc, db, a, "bench-check" if what == "checked"
                                  else "bench", tag, say)
        got[what] = x = _drain(api, db, workdir, a, queued, what)
        say(f"round {r + 1} {what:8s}: {x['reached']} of {queued} at {x['per_s']:7.1f}/s, "
            f"{x['cpu_ms'] or 0:.2f} ms of the workers' CPU each")
    return got


# --- the run ------------------------------------------------------------------------------

def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "api":
        p = argparse.ArgumentParser()
        p.add_argument("api")
        p.add_argument("--port", type=int, required=True)
        api_main(p.parse_args().port)
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["sqlite", "postgres"], required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--events", type=int, default=2000, help="queued for each drain")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="one short round, nothing written")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    p.add_argument("--chart", type=Path, default=ROOT / "docs" / "img")
    a = p.parse_args()
    if a.smoke:
        a.rounds, a.events, a.workers = 1, 100, 1
    started = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:5.0f} s] {text}", flush=True)
    result: dict = {"backend": a.backend, "date": time.strftime("%Y-%m-%d %H:%M"),
                    "command": f"python -m bench sends --backend {a.backend} --rounds "
                               f"{a.rounds} --events {a.events} --workers {a.workers}"}
    workdir = Path(tempfile.mkdtemp(prefix="keystore-sends-"))
    db, api = open_db(a.backend, workdir), Api()
    try:
        svc = Service(db.url, workdir / "queue.log", a.workers).start()
        try:
            ingest_id = make_source(svc, db, api)
            make_connections(svc, db, api)
            rounds = [one_round(r, svc, api, db, workdir, a, ingest_id, say)
                      for r in range(a.rounds)]
        finally:
            svc.stop()
    finally:
        api.stop()
        db.close()
    result.update(_figures(rounds))
    _print(result)
    complete = all(x["reached"] == x["queued"] == a.events for got in rounds
                   for x in got.values())
    if a.smoke:
        return 0 if complete else 1
    a.out.mkdir(parents=True, exist_ok=True)
    out = a.out / f"sends-{a.backend}-{time.strftime('%Y-%m-%d')}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    _chart(a.out, a.chart / "benchmarks-sends.png")
    return 0 if complete else 1


def _figures(rounds: list[dict]) -> dict:
    runs = {w: [round(got[w]["per_s"], 1) for got in rounds]
            for w in ("forwards", "sends", "checked")}
    rate = {w: median(v) for w, v in runs.items()}
    cpu = {w: round(median([got[w]["cpu_ms"] or 0 for got in rounds]), 2) for w in runs}
    return {
        "workers_cpu_ms_per_item": cpu,
        "forwards_per_s": round(rate["forwards"], 1), "sends_per_s": round(rate["sends"], 1),
        "checked_sends_per_s": round(rate["checked"], 1),
        "sends_vs_forwards": round(rate["sends"] / rate["forwards"], 3)
        if rate["forwards"] else None,
        # the drain's time per send, with a check (an unknown outcome, then its check) less
        # without: what a check adds, spread over the relays' concurrency
        "check_cost_ms": round(1e3 * (1 / rate["checked"] - 1 / rate["sends"]), 2)
        if rate["checked"] and rate["sends"] else None,
        "runs": runs,
        "not_reached": sum(x["queued"] - x["reached"] for got in rounds for x in got.values())}


def _print(result: dict) -> None:
    print(f"\n{result['backend']}: forwards {result['forwards_per_s']:.0f}/s, sends "
          f"{result['sends_per_s']:.0f}/s = {result['sends_vs_forwards']} of forwards "
          f"(target >= 0.8); sends settled by a check {result['checked_sends_per_s']:.0f}/s "
          f"(a check adds {result['check_cost_ms']} ms of drain per send); "
          f"{result['not_reached']} never reached the API")


def _chart(results: Path, path: Path) -> None:
    plt = report.pyplot()
    found = report.todays(results, "sends")
    if plt is None or not found:
        return
    with report.figure(plt, path, figsize=(7.5, 3.8), dpi=100) as (fig, ax):
        labels = ["forwards", "sends", "sends settled by a check"]
        width = 0.8 / len(found)
        for n, (backend, r) in enumerate(found.items()):
            values = [r["forwards_per_s"], r["sends_per_s"], r["checked_sends_per_s"]]
            bars = ax.bar([x + n * width for x in range(3)], values, width,
                          label=f"{report.NAMES[backend]} "
                                f"(sends / forwards {r['sends_vs_forwards']})")
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_xticks([x + width * (len(found) - 1) / 2 for x in range(3)], labels, fontsize=8)
        ax.set_ylabel("per second, drained by serve's relays")
        ax.set_title("sends beside forwards, to a no-op API (target: sends >= 0.8 of forwards)",
                     fontsize=10)
        ax.legend(fontsize=8)


if __name__ == "__main__":
    sys.exit(main())
