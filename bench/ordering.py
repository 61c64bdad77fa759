"""What a destination's serial ordering per key costs (docs/benchmarks.md, "Ordering per
key"; issue 29):

    python -m bench ordering --backend postgres [--rounds 2] [--events 3000] [--held 5000]
    python -m bench ordering --backend sqlite --smoke     # a short run, nothing written

1. Drain throughput: --events signed events accepted while no relay runs, then the relays
   of a `keystore serve` drain them to the no-op sink; forwards per second from the first
   arrival at the sink to the last. Three sources, alternating round by round: "none" (no
   ordering), "keys" (serial, event i has /data/object/id "k{i % 1000}") and "one" (serial,
   every event of one key, --one-events of them: one forward at a time, so the
   destination's round trip plus the take's bound).
2. What a held backlog costs everyone else: another source's accept-to-forward latency
   (--probe events sent at 5 a second) with nothing held, then with --held events of one
   key held behind their first, which a destination that refuses every connection keeps
   in retry. A held event stays due, so every take reads it (storage/take.py).

Every serial event must reach the sink in acceptance order per key (the database's
numbering; the key is in the event id, "d0keys-k17-42"). Writes
bench/results/ordering-<backend>-<date>.json and docs/img/benchmarks-ordering.png
(--smoke writes nothing, and exits 1 unless every event was delivered, in order).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from . import report
from .common import ROOT, SECRET, median
from .gateway import Sink, _scratch
from .rate import _read_response, percentile
from .recovery import _api, _wait_for_keys
from .servers import Service, free_port

KEYS = 1000  # the "serial with 1,000 keys"
SERIAL = {"key": "/data/object/id", "mode": "serial"}
VARIANTS = ("none", "keys", "one")
RELAY_ON = {"KEYSTORE_RELAY_IN_SERVE": "true"}


# --- signed events, a body per key --------------------------------------------------------

def _signed(key: str) -> tuple[bytes, str]:
    body = json.dumps({"type": "order.paid", "data": {"object": {"id": key}}},
                      separators=(",", ":")).encode()
    return body, "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


async def _send(url: str, ingest_id: str, events: list[str], rate: float,
                connections: int = 16, sent: dict[str, float] | None = None
                ) -> tuple[dict[str, float], int]:
    """Open loop, as gateway._send_at_rate, but each event's body carries the key its id
    names ("<prefix>-k17-42"). Returns {event id: when its 202 came}, how many were not;
    `sent` (if given) gets when each was sent."""
    host, port = url.split("//", 1)[1].split(":")
    bodies: dict[str, tuple[bytes, str]] = {}
    accepted: dict[str, float] = {}
    failed = 0
    t0 = time.perf_counter() + 0.1

    async def conn(n: int) -> None:
        nonlocal failed
        reader = writer = None
        for i in range(n, len(events), connections):
            pause = t0 + i / rate - time.perf_counter()
            if pause > 0:
                await asyncio.sleep(pause)
            event = events[i]
            key = event.split("-")[-2]
            body, signature = bodies.get(key) or bodies.setdefault(key, _signed(key))
            head = (f"POST /hooks/{ingest_id} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                    f"Content-Type: application/json\r\nX-Event-Id: {event}\r\n"
                    f"X-Signature: {signature}\r\nContent-Length: {len(body)}\r\n\r\n")
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(host, int(port))
                if sent is not None:
                    sent[event] = time.time()
                writer.write(head.encode() + body)
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
    await asyncio.gather(*(conn(n) for n in range(min(connections, len(events)))))
    return accepted, failed


def _source(svc: Service, db, name: str, url: str, ordering: dict | None) -> str:
    """A generic HMAC source as gateway.make_source's, named, with `ordering`."""
    made = _api(svc, db.operator_token, "POST", "/v1/sources", {
        "name": name, "provider": "generic", "secrets": [SECRET],
        "signature": {"header": "X-Signature", "algorithm": "sha256", "encoding": "hex",
                      "prefix": "sha256="},
        "event_id": {"header": "X-Event-Id"}, "max_in_flight": 64,
        "destination": {"url": url, "ordering": ordering}})
    return made["source"]["ingest_url"].rsplit("/", 1)[1]


def _accepted_order(db, prefix: str) -> list[str]:
    """The event ids of `prefix` in the order the database numbered them (acceptance)."""
    sql = "SELECT event_id FROM hook_events WHERE event_id LIKE ? ORDER BY id"
    if db.sqlite:
        with contextlib.closing(sqlite3.connect(make_url(db.url).database, timeout=60)) as c:
            return [r[0] for r in c.execute(sql, (prefix + "-%",))]
    with psycopg.connect(db.psycopg_url(), autocommit=True) as conn:
        return [r[0] for r in conn.execute(sql.replace("?", "%s"), (prefix + "-%",))]


def out_of_order(order: list[str], seen: dict[str, float]) -> int:
    """How many events reached the sink before an event of their key accepted earlier."""
    last: dict[str, float] = {}
    wrong = 0
    for event in order:
        key, at = event.split("-")[-2], seen.get(event)
        if at is not None:  # not delivered: counted apart
            wrong += at < last.get(key, 0.0)
            last[key] = max(at, last.get(key, 0.0))
    return wrong


# --- 1. drain throughput ------------------------------------------------------------------

def _queue(db, workdir: Path, a, ingest_id: str, events: list[str]
           ) -> tuple[dict[str, float], int]:
    """`events` accepted by a serve whose relays are off: they stay queued."""
    svc = Service(db.url, workdir / "queue.log", a.workers, source=a.source).start()
    try:
        return asyncio.run(_send(svc.url, ingest_id, events, 2000))
    finally:
        svc.stop()


def drain(db, workdir: Path, a, sink: Sink, ingest_id: str, variant: str, prefix: str
          ) -> dict:
    count = a.one_events if variant == "one" else a.events
    events = [f"{prefix}-k{0 if variant == 'one' else i % KEYS}-{i}" for i in range(count)]
    accepted, failed = _queue(db, workdir, a, ingest_id, events)
    sink.clear()
    svc = Service(db.url, workdir / "drain.log", a.workers, env=RELAY_ON,
                  source=a.source).start()
    try:
        done, seen = _wait_for_keys(sink, set(accepted), a.timeout)
    finally:
        svc.stop()
    times = sorted(seen[k] for k in accepted if k in seen)
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    wrong = out_of_order(_accepted_order(db, prefix), seen) if variant != "none" else 0
    return {"accepted": len(accepted), "not_accepted": failed, "delivered": len(times),
            "forwards_per_s": len(times) / span if span else 0.0,
            "out_of_order": wrong, "timed_out": not done}


def drains(db, workdir: Path, a, sink: Sink, ids: dict[str, str], say) -> dict:
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for r in range(a.rounds):
        # each round starts one further along: none always first would favour none
        for variant in VARIANTS[r % 3:] + VARIANTS[:r % 3]:
            got = drain(db, workdir, a, sink, ids[variant], variant, f"d{r}{variant}")
            runs[variant].append(got)
            say(f"round {r + 1} drain {variant:4s}: {got['forwards_per_s']:7.1f} forwards/s "
                f"({got['delivered']} of {got['accepted']}, {got['out_of_order']} out of "
                f"order)" + ("  (TIMED OUT)" if got["timed_out"] else ""))
    out: dict = {"events": a.events, "one_events": a.one_events, "key_count": KEYS}
    for variant, v in runs.items():
        out[variant] = {"forwards_per_s": round(median([x["forwards_per_s"] for x in v]), 1),
                        "runs": [round(x["forwards_per_s"], 1) for x in v],
                        "not_delivered": sum(x["accepted"] - x["delivered"] for x in v),
                        "not_accepted": sum(x["not_accepted"] for x in v),
                        "out_of_order": sum(x["out_of_order"] for x in v)}
    none, one = out["none"]["forwards_per_s"], out["one"]["forwards_per_s"]
    out["keys_vs_none"] = round(out["keys"]["forwards_per_s"] / none, 3) if none else None
    out["one_vs_none"] = round(one / none, 3) if none else None
    out["one_ms_per_forward"] = round(1e3 / one, 2) if one else None
    return out


# --- 2. the cost of a held backlog --------------------------------------------------------

def _probe(db, workdir: Path, a, sink: Sink, other_id: str, prefix: str) -> dict:
    """a.probe events of the other source at 5 a second: their accept-to-forward, from
    the 202 (the relay may be woken before the sender reads it: it can be ~0) and from the
    send (the ingest included), and the held source's state."""
    svc = Service(db.url, workdir / "probe.log", a.workers, env=RELAY_ON,
                  source=a.source).start()
    try:
        time.sleep(2)  # the relays' first takes (the held key's first refused forward)
        sink.clear()
        events = [f"{prefix}-k{i}-{i}" for i in range(a.probe)]
        sent: dict[str, float] = {}
        accepted, failed = asyncio.run(_send(svc.url, other_id, events, 5, connections=1,
                                             sent=sent))
        _, seen = _wait_for_keys(sink, set(accepted), 60)
        held = _held_state(svc, db)
    finally:
        svc.stop()
    got = sorted(seen[k] - t for k, t in accepted.items() if k in seen)
    whole = sorted(seen[k] - sent[k] for k in accepted if k in seen)

    def ms(values: list[float], pct: float) -> float | None:
        return round(percentile(values, pct) * 1e3, 1) if values else None
    return {"events": len(got), "not_forwarded": len(accepted) - len(got),
            "not_accepted": failed, "p50_ms": ms(got, 50), "p90_ms": ms(got, 90),
            "from_send_p50_ms": ms(whole, 50), "from_send_p90_ms": ms(whole, 90),
            "held_source": held}


def _held_state(svc: Service, db) -> dict:
    """That the backlog is held: its first event (h-k0-1 waits on it) refused, retried."""
    def one(event: str) -> dict:
        path = f"/v1/deliveries?source=order-held&event_id={event}"
        return (_api(svc, db.operator_token, "GET", path)["deliveries"] or [{}])[0]
    first = one("h-k0-1").get("waiting_on")  # the earliest accepted, with 16 connections
    return {"first": first,
            "first_attempts": one(first).get("attempt_count") if first else None}


def backlog(db, workdir: Path, a, sink: Sink, ids: dict[str, str], say) -> dict:
    """Not alternated: a backlog cannot be taken away and brought back without changing
    what the take reads, so the rounds without it run first."""
    out: dict = {"held": a.held, "probe_events": a.probe, "probe_rate": 5}
    for side in ("without", "with"):
        if side == "with":
            accepted, _ = _queue(db, workdir, a, ids["held"],
                                 [f"h-k0-{i}" for i in range(a.held)])
            out["held_accepted"] = len(accepted)
        out[side] = [_probe(db, workdir, a, sink, ids["other"], f"p{r}{side}")
                     for r in range(a.probe_rounds)]
        for r, p in enumerate(out[side]):
            say(f"round {r + 1} other source, {side} the backlog: p50 {p['p50_ms']} ms, p90 "
                f"{p['p90_ms']} ms (from the send {p['from_send_p50_ms']} / "
                f"{p['from_send_p90_ms']} ms), held source {p['held_source']}")
        for m in ("p50_ms", "from_send_p50_ms"):
            out[f"{side}_{m}"] = round(median([p[m] or 0 for p in out[side]]), 1)
    for m in ("p50_ms", "from_send_p50_ms"):
        out[f"added_{m}"] = round(out[f"with_{m}"] - out[f"without_{m}"], 1)
    return out


# --- the run ------------------------------------------------------------------------------

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["sqlite", "postgres"], required=True)
    p.add_argument("--rounds", type=int, default=3, help="of each drain")
    p.add_argument("--probe-rounds", type=int, default=2,
                   help="of the other source's events, without and with the backlog")
    p.add_argument("--events", type=int, default=3000, help="queued for each drain")
    p.add_argument("--one-events", type=int, default=500,
                   help="queued for the one-key drain (one forward at a time)")
    p.add_argument("--held", type=int, default=5000, help="events of one key held")
    p.add_argument("--probe", type=int, default=50, help="the other source's events")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=180, help="s, for one drain")
    p.add_argument("--source", type=Path, help="run keystore_service from this tree (a `git "
                   "archive` of another revision, its .revision file naming it)")
    p.add_argument("--smoke", action="store_true", help="one short round, nothing written")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    p.add_argument("--chart", type=Path, default=ROOT / "docs" / "img")
    a = p.parse_args()
    if a.smoke:
        a.rounds, a.events, a.one_events, a.held, a.probe, a.workers = 1, 300, 50, 500, 10, 1
        a.probe_rounds = 1
    started = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:5.0f} s] {text}", flush=True)
    result: dict = {"backend": a.backend, "date": time.strftime("%Y-%m-%d %H:%M"),
                    "command": f"python -m bench ordering --backend {a.backend} --rounds "
                               f"{a.rounds} --events {a.events} --one-events {a.one_events} "
                               f"--held {a.held} --probe {a.probe} --probe-rounds "
                               f"{a.probe_rounds} --workers {a.workers}"
                               + (f" --source {a.source}" if a.source else ""),
                    "revision": _revision(a.source)}
    with _scratch(a) as (workdir, db, sink):
        svc = Service(db.url, workdir / "setup.log", 1, source=a.source).start()
        try:
            ids = {v: _source(svc, db, f"order-{v}", sink.url + "/" + v,
                              None if v == "none" else SERIAL) for v in VARIANTS}
            # nothing listens at the held source's destination: its first is retried
            ids["held"] = _source(svc, db, "order-held", f"http://127.0.0.1:{free_port()}/",
                                  SERIAL)
            ids["other"] = _source(svc, db, "order-other", sink.url + "/other", None)
        finally:
            svc.stop()
        result["drain"] = drains(db, workdir, a, sink, ids, say)
        result["backlog"] = backlog(db, workdir, a, sink, ids, say)
    _print(result)
    d = result["drain"]
    complete = all(d[v]["not_delivered"] == d[v]["not_accepted"] == d[v]["out_of_order"] == 0
                   for v in VARIANTS) and all(
        p["not_forwarded"] == 0 and p["events"] for s in ("without", "with")
        for p in result["backlog"][s])
    if a.smoke:
        return 0 if complete else 1
    a.out.mkdir(parents=True, exist_ok=True)
    tag = f"-{result['revision']}" if a.source else ""  # beside this tree's, not over it
    out = a.out / f"ordering-{a.backend}-{time.strftime('%Y-%m-%d')}{tag}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    _chart(a.out, a.chart / "benchmarks-ordering.png")
    return 0 if complete else 1


def _revision(source: Path | None) -> str:
    """The commit measured: --source's (its .revision file, written beside the export) or
    this tree's HEAD, marked when the tree has changes."""
    if source is not None:
        return (source / ".revision").read_text().strip()
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(git + ["status", "--porcelain", "keystore_service"],
                           capture_output=True, text=True).stdout.strip()
    return head + (" with changes" if dirty else "")


def _print(result: dict) -> None:
    d, b = result["drain"], result["backlog"]
    print(f"\n{result['backend']}: drain of {d['events']} events to a no-op sink")
    for v, label in (("none", "no ordering"), ("keys", f"serial, {d['key_count']:,} keys"),
                     ("one", f"serial, 1 key ({d['one_events']} events)")):
        print(f"  {label:28s}: {d[v]['forwards_per_s']:7.1f} forwards/s "
              f"(runs {d[v]['runs']}, {d[v]['out_of_order']} out of order)")
    print(f"  keys / none = {d['keys_vs_none']}, one / none = {d['one_vs_none']} "
          f"({d['one_ms_per_forward']} ms a forward)")
    print(f"  another source's accept-to-forward p50: {b['without_p50_ms']} ms with nothing "
          f"held, {b['with_p50_ms']} ms with {b['held_accepted']} of one key held "
          f"({b['added_p50_ms']:+} ms); from the send {b['without_from_send_p50_ms']} / "
          f"{b['with_from_send_p50_ms']} ms ({b['added_from_send_p50_ms']:+} ms)")


def _chart(results: Path, path: Path) -> None:
    plt = report.pyplot()
    day = time.strftime("%Y-%m-%d")
    found = report.todays(results, "ordering", day)
    if plt is None or not found:
        return
    with report.figure(plt, path, ncols=2, figsize=(11, 3.8), dpi=100) as (fig, (ax, lx)):
        width = 0.8 / len(found)
        for n, (backend, r) in enumerate(found.items()):
            values = [r["drain"][v]["forwards_per_s"] for v in VARIANTS]
            bars = ax.bar([x + n * width for x in range(3)], values, width,
                          label=report.NAMES[backend])
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_xticks([x + width * (len(found) - 1) / 2 for x in range(3)],
                      ["no ordering", "serial, 1,000 keys", "serial, 1 key"], fontsize=8)
        ax.set_ylabel("forwards per second")
        ax.set_title("draining a queue to a no-op sink", fontsize=10)
        ax.legend(fontsize=8)
        # a run of another revision (--source) of the same day: its held backlog beside this one
        other = {b: json.loads(f.read_text()) for b in found
                 for f in sorted(results.glob(f"ordering-{b}-{day}-*.json"))[:1]}
        for n, (backend, r) in enumerate(found.items()):
            b, old = r["backlog"], other.get(backend, {}).get("backlog", {})
            bars = lx.bar([x + n * width for x in range(3)], [b["without_p50_ms"],
                          b["with_p50_ms"], old.get("with_p50_ms", 0)], width,
                          label=report.NAMES[backend])
            lx.bar_label(bars, fmt="%.0f", fontsize=7)
        held = next(iter(found.values()))["backlog"]["held"]
        before = next(iter(other.values()), {}).get("revision", "none run")
        lx.set_xticks([x + width * (len(found) - 1) / 2 for x in range(3)],
                      ["nothing held", f"{held:,} of one key held", f"the same, at {before}"],
                      fontsize=8)
        lx.set_ylabel("ms, accept to forward (p50)")  # from the 202
        lx.set_title("another source's events, 5 a second", fontsize=10)
        lx.legend(fontsize=8)


if __name__ == "__main__":
    sys.exit(main())
