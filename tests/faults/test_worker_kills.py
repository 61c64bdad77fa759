"""SIGKILL gunicorn workers mid-request, 100 times, while workers do claim -> effect ->
complete: no duplicate effect, no acknowledged completion lost."""
from __future__ import annotations

import random
import statistics
import threading
import time

from tests.faults.conftest import lookup_via
from tests.faults.harness import Load, Op, kill_random_worker, report, verify
from tests.support import Server

KILLS = 100
INTERVAL = 0.7  # mean seconds between kills: each lands mid-request, while others serve


def test_a_hundred_worker_kills(pg_database, sink, tenant_token, tmp_path):
    url = pg_database("_kills")
    token = tenant_token(url)
    server = Server(url, workers=4, threads=4, log_path=tmp_path / "server.log",
                    env={"KEYSTORE_RECONCILE_INTERVAL_SECONDS": "0"}).start()
    try:
        load = Load([server.url], token, sink, lease_seconds=3, deadline_seconds=240)
        # More than the run needs: the kills end it. (20,000 ran out after 88 of the 100
        # kills once claims got faster: group commit.)
        ops = [Op(f"inv-{n}") for n in range(60_000)]
        runner = threading.Thread(target=load.run, args=(ops, 8))
        runner.start()
        rng, kills = random.Random(7), []
        time.sleep(2)
        while len(kills) < KILLS and runner.is_alive():
            pids = server.worker_pids()
            if len(pids) >= 3 and kill_random_worker(pids, rng):  # never all at once
                kills.append(time.monotonic())
            time.sleep(INTERVAL * rng.uniform(0.5, 1.5))
        time.sleep(2)  # the last kill's recovery, then the run ends
        load.enough.set()
        runner.join()
        recoveries = [r for r in (load.recovery_after(k) for k in kills) if r is not None]
        time.sleep(load.lease_seconds + 0.5)  # leases held by lost claims run out, then:
        from keystore_service.bootstrap import build
        from keystore_service.settings import Settings
        reconciled = build(Settings(database_url=url)).jobs.reconcile()
        figures = verify(load, [op for op in ops if op.outcome != "not_tried"],
                         lookup_via(server.url, token))
        figures.update(worker_kills=len(kills), reconciled_after_run=dict(reconciled),
                       recovery_seconds_median=round(statistics.median(recoveries), 3),
                       recovery_seconds_max=round(max(recoveries), 3))
        report("worker_kills", figures)
    finally:
        server.stop()
    assert len(kills) == KILLS
    assert figures["exceptions_escaping_the_client"] == 0, load.crashes[:3]
    assert figures["duplicate_effects"] == 0
    assert figures["acknowledged_completions_lost"] == 0
    assert figures["outcomes"].get("done", 0) > 500
    # every operation that did not finish is visible to a person, none is silently lost
    assert set(figures["unresolved_surfaced_as"]) <= {"needs_reconciliation + review",
                                                      "absent"}
