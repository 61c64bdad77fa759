"""The benchmark harness's own logic (bench/): what makes its figures trustworthy.

The harness as a whole runs in CI as `bench/run --smoke`; these check the parts whose
mistakes would not show there: latency measured from the due time (no coordinated
omission), the database limit running the service's exact statement, profile attribution,
and targets judged the right way round.
"""
from __future__ import annotations

import argparse
import asyncio
import re
import socket
import threading
import time

from bench import dblimit, profile, rate, report
from bench.databases import BenchDb


def _stalling_server(stall_s: float) -> tuple[int, threading.Event]:
    """A keep-alive HTTP server that answers at once, except that it stalls once."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    done = threading.Event()

    def serve() -> None:
        conn, _ = srv.accept()
        stalled = False
        buf = b""
        while not done.is_set():
            data = conn.recv(65536)
            if not data:
                break
            buf += data
            while b"\r\n\r\n" in buf:
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
                if len(rest) < length:
                    break
                buf = rest[length:]
                if not stalled:
                    stalled = True
                    time.sleep(stall_s)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        conn.close()
        srv.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1], done


def test_constant_rate_counts_a_stall_in_every_request_that_was_due_during_it():
    port, done = _stalling_server(0.5)
    args = argparse.Namespace(url=f"http://127.0.0.1:{port}", mode="noop", token="-",
                              prefix="t", rate=40.0, seconds=1.5, connections=1)
    try:
        out = asyncio.run(rate.main_async(args))
    finally:
        done.set()
    assert out["status"] == {"200": 60}
    # ~20 requests were due during the 0.5 s stall; a closed-loop tool would show one slow
    # request (p90 near zero), measuring from the due time shows a quarter of them late.
    assert out["p90_us"] > 150_000
    assert out["p50_us"] < 150_000


def test_the_pgbench_script_is_the_services_claim_with_every_parameter_bound():
    db = BenchDb("postgres", "postgresql+psycopg://u@127.0.0.1:1/none", tenant_id=7)
    text, _ = dblimit.statements(db.url)["claim"]
    script = dblimit.pgbench_script(db, "claim", 1)
    assert "%(" not in script
    assert script.startswith("\\set k random(")
    assert "ON CONFLICT (tenant_id, scope, key) DO UPDATE" in script
    assert text.split(" VALUES ")[0] in script  # the same column list, in the same order
    assert "7::INTEGER" in script  # the tenant is bound


def test_profile_counts_only_threads_that_serve_a_request():
    raw = "\n".join([
        "_worker (concurrent/futures/thread.py:81);Condition.wait (threading.py:320) 90",
        "ThreadWorker.handle (gunicorn/workers/gthread.py:553);claim (keystore_service/web/api"
        ".py:64);KeyStoreService.claim (keystore_service/service/claims.py:75);RecordStore."
        "claim_with_trace (keystore_service/storage/records.py:97);Connection.wait "
        "(psycopg/connection.py:495) 6",
        "ThreadWorker.handle (gunicorn/workers/gthread.py:553);write (gunicorn/util.py:348) 4",
    ])
    text = profile.summarize(raw)
    assert "request samples: 10 (other thread samples, waiting for work: 90)" in text
    assert re.search(r"60\.0%\s+psycopg", text)
    assert re.search(r"60\.0%\s+store.claim", text)
    assert re.search(r"40\.0%\s+gunicorn", text)


def _result(claim_rps: float, noop_rps: float) -> dict:
    def s(rps: float, limit: float | None = None) -> dict:
        out = {"rps": rps, "p50_ms": 1.0, "p99_ms": 2.0, "status": {}, "failures": 0}
        if limit is not None:
            out["limit"] = limit
        return out
    closed = {"noop": s(noop_rps), "claim_new": s(claim_rps, 1000), "replay": s(50, 1000),
              "cycle": s(50), "hot_keys": s(50), "lookup": s(50, 1000),
              "batch": {**s(1, 100_000), "keys_per_s": 60_000}, "_locked_in_log": 0,
              "claim_new_64": s(claim_rps * 1.2), "ingest": s(40),
              "_latency": {"rate": 10, "claim": s(10), "noop": s(10)}}
    size = {"claim_new": s(1), "lookup": s(1)}
    return {"closed": closed, "growth": {"10": size, "50": size, "_sweep": {"ran": False}},
            "rss_mb_max": 80.0}


def test_targets_are_judged_the_right_way_round():
    derived = report.derive({"postgres": _result(claim_rps=700, noop_rps=1000)})
    slow = report.derive({"postgres": _result(claim_rps=40, noop_rps=1000)})
    assert [t["met"] for t in slow["targets"] if "claims of new keys / lookup" in t["target"]] \
        == [False]  # 0.8 of the lookup
    by_name = {re.split(r" (>=|<=|<|>) ", t["target"])[0]: t for t in derived["targets"]}
    # the lookup (50/s) is the reference: claims 700/s are 14x, replays 50/s are 1.0x
    assert by_name["PostgreSQL: claims of new keys / lookup"]["met"] is True
    assert by_name["PostgreSQL: replays / lookup"]["value"] == 1.0
    assert by_name["PostgreSQL: claims/s with 64 connections / with 16"]["met"] is True
    assert by_name["PostgreSQL: batch keys/s / raw insert keys/s"]["value"] == 0.6
    assert by_name["PostgreSQL: max RSS per worker (MiB)"]["met"] is True
    assert by_name["PostgreSQL: claim p99 during the sweep / before"]["met"] is None


def test_layouts_are_read_and_summed_as_ratios_to_the_same_layouts_lookup():
    from bench import layouts
    assert layouts.parse_layout("on-4x16") == ("on-4x16", True, 4, 16)
    assert layouts.parse_layout("off-2x32")[1:] == (False, 2, 32)
    assert layouts.parse_layout("on+later-4x16")[1:] == (True, 4, 16)
    for bad in ("on-4x", "yes-4x4", "on-٤x4"):
        try:
            layouts.parse_layout(bad)
        except argparse.ArgumentTypeError:
            continue
        raise AssertionError(f"{bad!r} was accepted")
    rounds = {"noop": [100, 90, 110], "lookup": [50, 60, 40], "claim_new": [40, 41, 39],
              "claim_new_64": [45] * 3, "replay": [48] * 3, "hot_keys": [30] * 3,
              "batch": [2] * 3}
    runs = {"on-4x16": {s: [{"rps": v, "p99_ms": 1.0, "bad": 0} for v in vs]
                        for s, vs in rounds.items()}}
    extra = {"on-4x16": {"group": [3.0, 5.0, 4.0], "rss_mb": [90.0, 95.0, 91.0]}}
    a = argparse.Namespace(rounds=3, seconds=6)
    out = layouts._summary("postgres", [layouts.parse_layout("on-4x16")], runs, extra,
                           {"noop_p99_ms": 2.0, "claim_p99_ms": 3.0}, a)
    row = out["layouts"]["on-4x16"]
    assert row["vs_lookup"]["claim_new"] == 0.8  # medians: 40 / 50
    assert row["claims_64_over_16"] == round(45 / 40, 3)
    assert (row["mean_group_at_64"], row["worker_rss_mb"], row["batch_keys_per_s"]) == (
        4.0, 95.0, 2000)


def test_the_gateway_sink_queues_a_burst_of_connections_without_dropping_any():
    """The relays open their pooled connections to the gateway bench's sink at once. With
    socketserver's listen backlog of 5 the kernel drops the SYNs that do not fit and the
    client sends them again 1 s later: forwards measured at ~1 s that were the sink's. The
    sink is not accepting here, so every connection must fit in its listen queue."""
    from bench.gateway import sink_server

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(sink_server(0, start_serving=False))
    conns = []
    try:
        for _ in range(64):
            conns.append(socket.create_connection(server.sockets[0].getsockname(),
                                                  timeout=0.5))
    finally:
        for conn in conns:
            conn.close()
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()
    assert len(conns) == 64


def test_the_gateway_sink_notes_each_event_once_over_keep_alive_and_answers_its_queries():
    """The bench's latency is the sink's first arrival of each event id minus its 202: a
    repeat must not move the first, pipelined and split requests must each be answered."""
    from bench.gateway import Sink

    sink = Sink()
    try:
        with socket.create_connection(("127.0.0.1", sink.port), timeout=5) as conn:
            def post(key: str, body: bytes = b'{"a":1}') -> bytes:
                return (f"POST /hook HTTP/1.1\r\nHost: x\r\nIdempotency-Key: {key}\r\n"
                        f"Content-Length: {len(body)}\r\n\r\n").encode() + body
            conn.sendall(post("e1") + post("e2"))  # two in one segment
            answers = b""
            while answers.count(b"200 OK") < 2:
                answers += conn.recv(4096)
            first = sink.times()
            one = post("e1", b"x" * 5000)  # a repeat, split in the middle of its body
            conn.sendall(one[:100])
            time.sleep(0.05)
            conn.sendall(one[100:])
            while answers.count(b"200 OK") < 3:
                answers += conn.recv(4096)
        assert sorted(first) == ["e1", "e2"]
        assert sink.times() == first and sink.count() == 2  # the repeat moved nothing
        sink.clear()
        assert sink.count() == 0
    finally:
        sink.stop()


def test_every_part_of_the_harness_that_runs_on_its_own_is_a_command_of_python_m_bench():
    """`python -m bench <what>` is the one entry point: a module that can run by itself
    (`python -m bench.<module>`, as the harness starts its own processes) is one of its
    commands, and each command has the `main` it dispatches to."""
    import importlib
    from pathlib import Path

    from bench import __main__ as entry

    folder = Path(entry.__file__).parent
    runnable = {p.stem for p in folder.glob("*.py")
                if p.stem != "__main__" and 'if __name__ == "__main__":' in p.read_text()}
    assert runnable <= set(entry.COMMANDS)
    for what in entry.COMMANDS:
        assert callable(importlib.import_module(f"bench.{what}").main), what
    assert entry.main(["no-such-part"]) == 2
