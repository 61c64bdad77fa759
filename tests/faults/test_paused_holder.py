"""A holder SIGSTOPped past its lease, then SIGCONTed: it must not complete over a newer
attempt (fencing), and no effect may happen twice. 20 trials."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from keystore_client import KeyStore, KeyStoreError, NeedsReconciliation, RetryPolicy

from tests.faults.conftest import lookup_via
from tests.faults.harness import report
from tests.support import Server

TRIALS = 20
# (holder's on_stale, where it is paused): under `retry` the competitor takes over and the
# paused holder's late effect is refused by the fenced sink (its attempt is older); under
# `reconcile` nobody takes over, and the holder's late completion settles the record.
KINDS = [("retry", "after_claim"), ("reconcile", "after_effect"), ("reconcile", "after_claim")]


def trial(n, server, token, sink):
    on_stale, where = KINDS[n % len(KINDS)]
    key = f"paused-{n}"
    holder = subprocess.Popen([sys.executable, "-m", "tests.faults.holder", server.url, token,
                               key, on_stale, sink.url, where],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "PAUSED"
    os.kill(holder.pid, signal.SIGSTOP)  # frozen: its threads too, the lease keeper included
    stopped = time.monotonic()
    time.sleep(2.3)  # past the 2 s lease
    competitor = KeyStore(server.url, token, retry=RetryPolicy(tries=3, budget=5))
    try:
        claimed = competitor.claim("invoice", key, payload={"key": key}, lease_seconds=30)
        seen = claimed.outcome
        if claimed.acquired:
            sink.record(key, {"attempt": claimed.attempt})
            competitor.complete("invoice", key, claimed.lease_token,
                                result={"resource_id": f"competitor-{claimed.attempt}"})
    except NeedsReconciliation:
        seen = "needs_reconciliation"
    except KeyStoreError as exc:
        seen = getattr(exc, "code", "error")
    os.kill(holder.pid, signal.SIGCONT)
    holder.stdin.write("go\n")
    holder.stdin.flush()
    out = json.loads(holder.stdout.readline())
    holder.wait(30)
    record = lookup_via(server.url, token)(key)
    return {"kind": f"{on_stale}/{where}", "competitor": seen, "holder": out,
            "paused_seconds": round(time.monotonic() - stopped, 2),
            "final_state": record["state"], "final_result": (record["result"] or {}).get(
                "resource_id")}


def test_twenty_paused_holders(pg_database, fenced_sink, tenant_token, tmp_path):
    url = pg_database("_paused")
    token = tenant_token(url)
    server = Server(url, workers=2, threads=4, log_path=tmp_path / "server.log").start()
    try:
        with ThreadPoolExecutor(5) as pool:
            trials = list(pool.map(lambda n: trial(n, server, token, fenced_sink),
                                   range(TRIALS)))
    finally:
        server.stop()
    figures = {
        "trials": TRIALS, "by_kind": dict(Counter(t["kind"] for t in trials)),
        "effects": sum(len(v) for v in fenced_sink.effects.values()),
        "duplicate_effects": fenced_sink.duplicates(),
        "stale_effects_refused_by_fencing": sum(fenced_sink.refused.values()),
        "stale_completions_refused": sum(t["holder"]["complete"] == "lease_lost"
                                         for t in trials),
        "stale_completions_accepted_over_newer_attempt": sum(
            t["holder"]["complete"] == "ok" and t["competitor"] == "acquired" for t in trials),
        "late_completions_settling_reconciliation": sum(
            t["holder"]["complete"] == "ok" and t["competitor"] == "needs_reconciliation"
            for t in trials),
    }
    report("paused_holders", figures)
    assert figures["duplicate_effects"] == 0
    assert figures["stale_completions_accepted_over_newer_attempt"] == 0
    for t in trials:
        if t["competitor"] == "acquired":  # the newer attempt's result stands
            assert t["holder"]["complete"] == "lease_lost" and t["holder"]["effect"] == 409
            assert t["final_result"].startswith("competitor-")
        else:
            assert t["competitor"] == "needs_reconciliation"
            assert (t["holder"]["complete"], t["final_state"]) == ("ok", "succeeded")
    assert figures["stale_completions_refused"] >= 5
