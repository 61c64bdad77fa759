"""Stop PostgreSQL abruptly (-m immediate) and start it again, 3 times, under load from
clients split between two service instances: nothing duplicated, nothing acknowledged lost."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from keystore_service.storage import migrate
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
        # More operations than the run needs: the load lasts through every restart however
        # fast the machine, and ends 3 s after the last one (after its recovery).
        ops = [Op(f"inv-{n}") for n in range(20_000)]
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
        time.sleep(3)
        load.enough.set()
        runner.join()
        recoveries = [load.recovery_after(t) for t in restarts]
        time.sleep(load.lease_seconds + 0.5)
        from keystore_service.bootstrap import build
        from keystore_service.settings import Settings
        reconciled = build(Settings(database_url=url)).jobs.reconcile()
        lookup = lookup_via(a.url, token)  # its first reads meet connections the restarts
        figures = verify(load, [op for op in ops if op.outcome != "not_tried"], lookup)
        figures["lookups_refused_after_the_restarts"] = lookup.unavailable  # killed: 503s
        figures.update(database_restarts=RESTARTS, instances=2, database_down_seconds=downtime,
                       recovery_seconds=[round(r, 3) if r is not None else None
                                         for r in recoveries],
                       reconciled_after_run=dict(reconciled))
        report("database_restarts", figures)
    finally:
        a.stop()
        b.stop()
    assert figures["exceptions_escaping_the_client"] == 0, load.crashes[:3]
    assert figures["duplicate_effects"] == 0
    assert figures["acknowledged_completions_lost"] == 0
    assert figures["lookups_refused_after_the_restarts"] == 0  # read again on a new connection
    assert all(r is not None and r < 15 for r in recoveries)
    assert set(figures["unresolved_surfaced_as"]) <= {"needs_reconciliation + review",
                                                      "in_progress", "absent"}


def test_the_first_reads_after_a_restart_are_answered(private_pg, tenant_token, tmp_path):
    """Every pooled connection dies with the server; the next reads must not turn into 503s
    (a lookup is repeated on a new connection) and claims must not either."""
    url = private_pg.url
    migrate.upgrade(url)
    token = tenant_token(url)
    server = Server(url, workers=1, threads=8, log_path=tmp_path / "server.log",
                    env={"KEYSTORE_RECONCILE_INTERVAL_SECONDS": "0",
                         "KEYSTORE_SWEEP_INTERVAL_SECONDS": "0"}).start()
    auth = {"Authorization": f"Bearer {token}"}
    try:
        for n in range(8):
            r = requests.post(server.url + "/v1/claim", json={"scope": "s", "key": f"k{n}"},
                              headers=auth, timeout=10)
            assert r.status_code == 201, r.text
        with ThreadPoolExecutor(8) as pool:  # eight connections in the worker's pool
            list(pool.map(lambda n: requests.get(server.url + "/v1/keys", headers=auth,
                                                 params={"scope": "s", "key": f"k{n}"},
                                                 timeout=10), range(64)))
        private_pg.stop_immediately()
        private_pg.start()
        with ThreadPoolExecutor(8) as pool:
            reads = list(pool.map(lambda n: requests.get(
                server.url + "/v1/keys", params={"scope": "s", "key": f"k{n % 8}"},
                headers=auth, timeout=10).status_code, range(16)))
        claim = requests.post(server.url + "/v1/claim", json={"scope": "s", "key": "new"},
                              headers=auth, timeout=10)
    finally:
        server.stop()
    assert reads == [200] * 16
    assert claim.status_code == 201, claim.text
