"""Stop PostgreSQL abruptly (-m immediate) and start it again, 3 times, under load from
clients split between two service instances: nothing duplicated, nothing acknowledged lost."""
from __future__ import annotations

import threading
import time

from keystore_service import migrate
from tests.faults.conftest import lookup_via
from tests.faults.harness import Load, Op, report, verify
from tests.support import Server

RESTARTS = 3


def test_three_database_restarts_under_load(private_pg, sink, tenant_token, tmp_path):
    url = private_pg.url
    migrate.upgrade(url)
    token = tenant_token(url)
    env = {"KEYSTORE_RECONCILE_INTERVAL_SECONDS": "0", "KEYSTORE_POOL_SIZE": "4"}
    a = Server(url, workers=2, threads=4, log_path=tmp_path / "a.log", env=env).start()
    b = Server(url, workers=2, threads=4, log_path=tmp_path / "b.log", env=env).start()
    try:
        load = Load([a.url, b.url], token, sink, lease_seconds=3, deadline_seconds=75)
        ops = [Op(f"inv-{n}") for n in range(3000)]
        runner = threading.Thread(target=load.run, args=(ops, 8))
        runner.start()
        restarts, downtime = [], []
        for _ in range(RESTARTS):
            time.sleep(6)
            stopped = time.monotonic()
            private_pg.stop_immediately()
            time.sleep(2)
            private_pg.start()
            up = time.monotonic()
            restarts.append(up)
            downtime.append(round(up - stopped, 2))
        runner.join()
        recoveries = [load.recovery_after(t) for t in restarts]
        time.sleep(load.lease_seconds + 0.5)
        from keystore_service.app import build
        from keystore_service.settings import Settings
        reconciled = build(Settings(database_url=url)).jobs.reconcile()
        figures = verify(load, [op for op in ops if op.outcome != "not_tried"],
                         lookup_via(a.url, token))
        figures.update(database_restarts=RESTARTS, instances=2, database_down_seconds=downtime,
                       recovery_seconds=[round(r, 3) if r is not None else None
                                         for r in recoveries],
                       reconciled_after_run=dict(reconciled))
        report("database_restarts", figures)
    finally:
        a.stop()
        b.stop()
    assert figures["duplicate_effects"] == 0
    assert figures["acknowledged_completions_lost"] == 0
    assert all(r is not None and r < 15 for r in recoveries)
    assert set(figures["unresolved_surfaced_as"]) <= {"needs_reconciliation + review",
                                                      "in_progress", "absent"}
