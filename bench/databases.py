"""Benchmark databases: a fresh SQLite file or PostgreSQL database, a token, and rows loaded
fast with SQL (generate_series on PostgreSQL, a recursive CTE on SQLite).

Loaded rows are finished records `g-00000001` ... of scope `bench` whose fingerprint is the
one of the payload bench/wrk.lua sends, so a claim of one of them is a replay and a lookup
finds it; the sweep scenario loads expired ones under the prefix `x-`. Keys are zero-padded
so that they arrive in index order: a load of millions of rows appends to the B-tree.
"""
from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from keystore_service.domain import canonical
from keystore_service.storage import migrate
from keystore_service.storage.accounts import AccountError, Accounts
from keystore_service.storage.db import Database, create

from .rate import PAYLOAD

PG_ADMIN_URL = os.environ.get("KEYSTORE_BENCH_POSTGRES_URL",
                              os.environ.get("KEYSTORE_TEST_POSTGRES_URL",
                                             "postgresql://postgres@127.0.0.1:5432/test"))
FINGERPRINT = canonical.fingerprint(json.loads(PAYLOAD))
SECOND = 1_000_000
DAY = 86_400 * SECOND
RESULT = '{"resource_id":"inv-1","status_code":201}'
CHUNK = 1_000_000  # rows per INSERT statement: progress to print, and no giant transaction
COLUMNS = ("tenant_id, scope, key, state, fingerprint, attempt, incarnation, lease_token_hash, "
           "lease_acquired_at, lease_expires_at, on_stale, first_seen_at, last_seen_at, "
           "expires_at, duplicate_count, checkpoint_step, checkpoint_resource_id, "
           "checkpoint_at, result, version_kind, version")


@dataclass
class BenchDb:
    backend: str  # "sqlite" | "postgres"
    url: str
    token: str = ""
    operator_token: str = ""
    ingest_id: str = ""  # the gateway scenario's source, once made (scenarios.ingest_id)
    tenant_id: int = 0
    rows: dict[str, int] = field(default_factory=dict)  # prefix -> rows loaded
    _cleanup: list = field(default_factory=list)

    @property
    def sqlite(self) -> bool:
        return self.backend == "sqlite"

    def psycopg_url(self) -> str:
        return self.url.replace("postgresql+psycopg://", "postgresql://")

    def close(self) -> None:
        for fn in reversed(self._cleanup):
            fn()
        self._cleanup.clear()


def open_db(backend: str, workdir: Path) -> BenchDb:
    """A new, migrated database with tenant `bench` and a client token for it."""
    if backend == "sqlite":
        path = Path(tempfile.mkdtemp(prefix="sqlite-", dir=workdir)) / "keystore.db"
        db = BenchDb("sqlite", f"sqlite:///{path}")
    else:
        name = f"keystore_bench_{os.getpid()}_{secrets.token_hex(3)}"
        with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        db = BenchDb("postgres", make_url(PG_ADMIN_URL).set(database=name)
                     .render_as_string(hide_password=False))

        def drop() -> None:
            with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=10) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        db._cleanup.append(drop)
    migrate.upgrade(db.url)
    database = Database(create(db.url, pool_size=1))
    try:
        accounts = Accounts(database)
        try:
            db.tenant_id = accounts.create_tenant("bench", _now())
        except AccountError:
            pass
        db.token = accounts.create_token("bench", "client", None, _now())
        db.operator_token = accounts.create_token("bench", "operator", None, _now())
        with database.connection() as cur:
            cur.execute("SELECT id FROM tenants WHERE name = 'bench'")
            db.tenant_id = cur.fetchone()[0]
    finally:
        database.engine.dispose()
    return db


def _now() -> int:
    return time.time_ns() // 1000


def load_rows(db: BenchDb, upto: int, prefix: str = "g-", expired: bool = False,
              progress=print) -> float:
    """Grow the loaded rows under `prefix` to `upto`; returns the seconds it took."""
    start, have = time.monotonic(), db.rows.get(prefix, 0)
    now = _now()
    first, expires = (now - 4 * DAY, now - DAY) if expired else (now, now + 30 * DAY)
    params = {"t": db.tenant_id, "p": prefix, "fp": FINGERPRINT, "first": first,
              "exp": expires, "result": RESULT}
    while have < upto:
        a, b = have + 1, min(upto, have + CHUNK)
        if db.sqlite:
            _load_sqlite(db, {**params, "a": a, "b": b})
        else:
            _load_pg(db, {**params, "a": a, "b": b})
        have = b
        progress(f"    loaded {prefix}* rows: {have:,} of {upto:,} "
                 f"({time.monotonic() - start:.0f} s)")
    db.rows[prefix] = have
    analyze(db)
    return time.monotonic() - start


_SELECTED = ("{t}, 'bench', {key}, 'succeeded', {fp}, 1, 1, NULL, {first}, NULL, 'reconcile', "
             "{first}, {first}, {exp}, 0, NULL, NULL, NULL, {result}, NULL, NULL")


def _load_sqlite(db: BenchDb, params: dict) -> None:
    import sqlite3
    sel = _SELECTED.format(t=":t", key="printf('%s%08d', :p, n)", fp=":fp", first=":first",
                           exp=":exp", result=":result")
    conn = sqlite3.connect(make_url(db.url).database, timeout=60, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(f"INSERT INTO records ({COLUMNS}) WITH RECURSIVE s(n) AS "
                     f"(SELECT :a UNION ALL SELECT n + 1 FROM s WHERE n < :b) "
                     f"SELECT {sel} FROM s", params)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _load_pg(db: BenchDb, params: dict) -> None:
    sel = _SELECTED.format(t="%(t)s", key="%(p)s || lpad(g::text, 8, '0')", fp="%(fp)s",
                           first="%(first)s", exp="%(exp)s", result="%(result)s")
    with psycopg.connect(db.psycopg_url(), autocommit=True) as conn:
        conn.execute(f"INSERT INTO records ({COLUMNS}) SELECT {sel} "
                     f"FROM generate_series(%(a)s::bigint, %(b)s::bigint) AS g", params)


def analyze(db: BenchDb) -> None:
    """Fresh planner statistics (and, on PostgreSQL, a vacuumed table) after a load."""
    if db.sqlite:
        import sqlite3
        conn = sqlite3.connect(make_url(db.url).database, timeout=60, isolation_level=None)
        try:
            conn.execute("ANALYZE")
        finally:
            conn.close()
    else:
        with psycopg.connect(db.psycopg_url(), autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE) records")


def count_rows(db: BenchDb, where: str = "true") -> int:
    if db.sqlite:
        import sqlite3
        conn = sqlite3.connect(make_url(db.url).database, timeout=60)
        try:
            return conn.execute(f"SELECT count(*) FROM records WHERE {where}").fetchone()[0]
        finally:
            conn.close()
    with psycopg.connect(db.psycopg_url(), autocommit=True) as conn:
        return conn.execute(f"SELECT count(*) FROM records WHERE {where}").fetchone()[0]
