"""The reconciler and the sweeper in 3 processes at once on 10,000 records in PostgreSQL,
while claims go on: each record handled exactly once, no deadlock, no failed claim."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import psycopg
import pytest

from keystore_service.bootstrap import build
from keystore_service.errors import KeystoreError
from keystore_service.service.claims import Claim, system_clock
from keystore_service.settings import Settings

STALE, EXPIRED = 5_000, 5_000


@pytest.mark.postgres
def test_three_processes_handle_each_record_once(pg_database):
    url = pg_database("_jobs")
    ks = build(Settings(database_url=url))
    tenant_id = ks.accounts.create_tenant("jobs", system_clock())
    now = system_clock()
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("""
            INSERT INTO records (tenant_id, scope, key, state, attempt, incarnation,
                lease_token_hash, lease_acquired_at, lease_expires_at, on_stale, first_seen_at,
                last_seen_at, expires_at, duplicate_count, result)
            SELECT %(t)s, 'jobs', 'stale-' || n, 'in_progress', 1, 1, md5(n::text),
                   %(now)s - 120000000, %(now)s - 60000000, 'reconcile', %(now)s - 120000000,
                   %(now)s - 120000000, %(now)s + 3600000000, 0, NULL
            FROM generate_series(1, %(stale)s) AS n
            UNION ALL
            SELECT %(t)s, 'jobs', 'old-' || n, 'succeeded', 1, 1, md5(n::text), %(now)s - 7e9,
                   NULL, 'reconcile', %(now)s - 7e9, %(now)s - 7e9, %(now)s - 1000, 0, '{}'
            FROM generate_series(1, %(expired)s) AS n""",
                     {"t": tenant_id, "now": now, "stale": STALE, "expired": EXPIRED})
    stop, claims, failures = threading.Event(), [0], []

    def keep_claiming():
        n = 0
        while not stop.is_set() and n < 5_000:  # bounded
            n += 1
            try:
                # a lease that outlasts the run (its bound is 300 s): a slow run must not
                # make these live claims stale, the reconciler's to handle as well
                ks.service.claim(tenant_id, Claim("live", f"k{n % 300}", None, 3600, 900,
                                                  "reconcile"))
            except KeystoreError as exc:
                if exc.status >= 500:
                    failures.append(exc.code)
            claims[0] += 1
    claimer = threading.Thread(target=keep_claiming)
    claimer.start()
    started = time.monotonic()
    workers = [subprocess.Popen([sys.executable, "-m", "tests.e2e.jobs_worker", url],
                                stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [w.communicate(timeout=300)[0] for w in workers]
    elapsed = time.monotonic() - started
    stop.set()
    claimer.join(60)
    assert [w.returncode for w in workers] == [0, 0, 0]
    results = [json.loads(out) for out in outputs]
    reconciled = sum(r["reconciled"].get("needs_reconciliation", 0) for r in results)
    swept = sum(r["swept"] for r in results)
    assert (reconciled, swept) == (STALE, EXPIRED)
    assert sum(r["reconciled"].get("changed_meanwhile", 0) for r in results) == 0
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        states = dict(conn.execute("SELECT state, count(*) FROM records WHERE scope = 'jobs' "
                                   "GROUP BY state").fetchall())
        per_record = conn.execute("SELECT max(c), min(c), count(*) FROM (SELECT record_id, "
                                  "count(*) AS c FROM reviews GROUP BY record_id) x").fetchone()
    assert states == {"needs_reconciliation": STALE}
    assert per_record == (1, 1, STALE)  # one stale_lease review per record, never two
    assert failures == [] and claims[0] > 0
    print(f"\n3 processes: {reconciled} reconciled, {swept} swept in {elapsed:.1f}s; "
          f"{claims[0]} claims meanwhile, none failed")
    ks.database.engine.dispose()
