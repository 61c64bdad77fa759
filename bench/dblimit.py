"""The database limit: the service's own statements without HTTP, Flask or gunicorn.

- PostgreSQL: `pgbench` runs the very SQL text the service compiled (the claim's INSERT ...
  ON CONFLICT DO UPDATE ... RETURNING, the lookup's SELECT, the batch's INSERT ... FROM
  jsonb_array_elements), with prepared statements, 8 clients on 2 threads.
- SQLite: a plain Python loop in its own process (`python -m bench.dblimit`) runs the same
  compiled text on one sqlite3 connection in autocommit, with the service's pragmas. One
  process, because SQLite has one writer at a time whatever the number of processes.

Values that only vary in the service (the clock, the lease token's hash) are constants
here: the reference measures the database, not Python's clock or hashing.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from keystore_service.storage.db import Database, create
from keystore_service.storage.sql import BatchSql
from keystore_service.storage.records import RecordStore, new_record_values

from .databases import FINGERPRINT, BenchDb

HASH = "0" * 64
MINUTE = 60_000_000
BATCH = 1000
PGBENCH_CLIENTS = 8


def statements(url: str) -> dict:
    """The service's compiled claim and lookup statements (text and literal defaults)."""
    database = Database(create(url, pool_size=1))
    try:
        store = RecordStore(database)
        return {"claim": (store._claim.text, store._claim._defaults),
                "lookup": (store._get.text, store._get._defaults)}
    finally:
        database.engine.dispose()


def _literal(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, int):
        return str(v)
    return "'" + str(v).replace("'", "''") + "'"


def pgbench_script(db: BenchDb, mode: str, key_range: int) -> str:
    """A pgbench script of one mode: claim (new keys), replay, lookup, batch."""
    now = time.time_ns() // 1000
    if mode == "batch":
        text = BatchSql(False).text["insert"]
        values = {"tenant_id": db.tenant_id, "scope": "bench", "now": now,
                  "lease_until": now + 5 * MINUTE, "expires_at": now + 72 * 60 * MINUTE,
                  "on_stale": "reconcile"}
        exprs = {k: _literal(v) for k, v in values.items()}
        exprs["rows"] = (  # the JSON rows the service sends, built by the server
            f"(SELECT jsonb_agg(jsonb_build_array("
            f"'pgbb-' || :client_id || '-' || :k || '-' || g, 'fp-' || g, '{HASH}', NULL, NULL)"
            f" ORDER BY g) FROM generate_series(1, {BATCH}) AS g)")
        head = "\\set k random(1, 4000000000000000000)\n"
    else:
        text, defaults = statements(db.url)["claim" if mode != "lookup" else "lookup"]
        values = new_record_values(db.tenant_id, "bench", "", FINGERPRINT, HASH, now,
                                   now + 5 * MINUTE, now + 72 * 60 * MINUTE, "reconcile")
        exprs = {k: _literal(v) for k, v in {**values, **defaults}.items()}
        if mode == "claim":
            exprs["key"] = "('pgb-' || :client_id || '-' || :k)"
            head = "\\set k random(1, 4000000000000000000)\n"
        else:
            exprs["key"] = "('g-' || lpad(:k::text, 8, '0'))"
            head = f"\\set k random(1, {key_range})\n"
        exprs["tenant_id"] = str(db.tenant_id)
    sql = re.sub(r"%\((\w+)\)s", lambda m: exprs[m.group(1)], text)
    return head + " ".join(sql.split()) + ";\n"


def pgbench(db: BenchDb, mode: str, seconds: float, key_range: int = 1) -> float:
    """Statements per second (keys per second for `batch`) that pgbench reaches."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(pgbench_script(db, mode, key_range))
    try:
        out = subprocess.run(
            ["pgbench", "-n", "-M", "prepared", "-c", str(PGBENCH_CLIENTS), "-j", "2",
             "-T", str(max(1, round(seconds))), "-f", f.name, db.psycopg_url()],
            capture_output=True, text=True, timeout=seconds + 120)
    finally:
        Path(f.name).unlink()
    m = re.search(r"tps = ([0-9.]+) \(without initial", out.stdout)
    failed = re.search(r"number of failed transactions: (\d+)", out.stdout)
    if out.returncode != 0 or not m or (failed and int(failed.group(1))):
        raise RuntimeError(f"pgbench {mode} failed: {out.stdout[-400:]} {out.stderr[-800:]}")
    return float(m.group(1)) * (BATCH if mode == "batch" else 1)


def sqlite_loop(db: BenchDb, mode: str, seconds: float, key_range: int = 1) -> float:
    """The same rate from a plain Python loop on SQLite, run in its own process."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.dblimit", "--url", db.url, "--mode", mode,
         "--seconds", str(seconds), "--range", str(key_range), "--tenant", str(db.tenant_id)],
        capture_output=True, text=True, timeout=seconds + 120, cwd=Path(__file__).parent.parent)
    if out.returncode != 0:
        raise RuntimeError(f"sqlite loop {mode} failed: {out.stderr[-800:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["rps"]


def limit(db: BenchDb, mode: str, seconds: float, key_range: int = 1) -> float:
    return (sqlite_loop if db.sqlite else pgbench)(db, mode, seconds, key_range)


def _run_sqlite(a: argparse.Namespace) -> dict:
    import random
    import sqlite3

    from sqlalchemy.engine import make_url
    stm = statements(a.url)
    conn = sqlite3.connect(make_url(a.url).database, timeout=5, isolation_level=None)
    for pragma in ("busy_timeout = 5000", "synchronous = NORMAL", "foreign_keys = ON"):
        conn.execute(f"PRAGMA {pragma}")
    cur = conn.cursor()
    tag = f"sq{time.time_ns()}"
    now = time.time_ns() // 1000
    values = new_record_values(a.tenant, "bench", "", FINGERPRINT, HASH, now, now + 5 * MINUTE,
                               now + 72 * 60 * MINUTE, "reconcile")
    batch = BatchSql(True)
    n, deadline, start = 0, time.monotonic() + a.seconds, time.monotonic()
    while time.monotonic() < deadline:
        n += 1
        if a.mode == "batch":
            rows = [(f"{tag}-{n}-{i}", f"fp-{i}", HASH, None, None) for i in range(BATCH)]
            cur.execute("BEGIN IMMEDIATE")
            batch.insert(cur, {k: values[k] for k in ("tenant_id", "scope", "on_stale")}
                         | {"now": now, "lease_until": values["lease_expires_at"],
                            "expires_at": values["expires_at"]}, rows)
            cur.execute("COMMIT")
            continue
        text, defaults = stm["lookup" if a.mode == "lookup" else "claim"]
        key = f"{tag}-{n}" if a.mode == "claim" else f"g-{random.randint(1, a.range):08d}"
        params = {**defaults, **values, "key": key}
        if a.mode == "lookup":
            params = {"tenant_id": a.tenant, "scope": "bench", "key": key}
        cur.execute(text, params)
        cur.fetchone()
    elapsed = time.monotonic() - start
    return {"rps": n * (BATCH if a.mode == "batch" else 1) / elapsed, "n": n}


def main() -> None:
    p = argparse.ArgumentParser(description="SQLite's limit for one statement, no HTTP")
    p.add_argument("--url", required=True)
    p.add_argument("--mode", choices=["claim", "replay", "lookup", "batch"], required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--range", type=int, default=1)
    p.add_argument("--tenant", type=int, required=True)
    print(json.dumps(_run_sqlite(p.parse_args())))


if __name__ == "__main__":
    main()
