"""Statements built once with SQLAlchemy Core, compiled once per dialect, run on DBAPI cursors.

The claim is paid on every event of every connector, so its statements are not rebuilt and
recompiled per request: a Core statement is compiled at start into the driver's SQL string,
and each call only binds parameters (measured in bench/NOTES.md).
"""
from __future__ import annotations

import json
from typing import Any, Optional

from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement


class Sql:
    """One compiled statement: `run(cursor, **params)` binds by name and executes."""

    __slots__ = ("text", "_defaults")

    def __init__(self, stmt: ClauseElement, dialect: Dialect, *, bound: bool = False):
        """`bound=True` for a statement built for one call with all its values in it: IN
        lists are then expanded at compile time (operator queries, never the hot path)."""
        compiled = stmt.compile(dialect=dialect,
                                compile_kwargs={"render_postcompile": True} if bound else {})
        self.text = compiled.string
        # Literal values inside the statement (state names, + 1) become anonymous binds.
        self._defaults = {k: v for k, v in compiled.params.items() if v is not None}

    def run(self, cur: Any, params: Optional[dict] = None) -> Any:
        cur.execute(self.text, {**self._defaults, **params} if params else self._defaults)
        return cur

    def one(self, cur: Any, params: Optional[dict] = None) -> Optional[tuple]:
        return self.run(cur, params).fetchone()

    def all(self, cur: Any, params: Optional[dict] = None) -> list[tuple]:
        return self.run(cur, params).fetchall()


COLUMNS = ("id, tenant_id, scope, key, state, fingerprint, attempt, incarnation, "
            "lease_token_hash, lease_acquired_at, lease_expires_at, on_stale, first_seen_at, "
            "last_seen_at, expires_at, duplicate_count, checkpoint_step, "
            "checkpoint_resource_id, checkpoint_at, result, version_kind, version, review_id, "
           "result_resource_id")
_INSERTED = ("tenant_id, scope, key, state, fingerprint, attempt, incarnation, lease_token_hash, "
             "lease_acquired_at, lease_expires_at, on_stale, first_seen_at, last_seen_at, "
             "expires_at, duplicate_count, version_kind, version")

# One statement per step whatever the batch size: the items travel as arrays (PostgreSQL)
# or as one JSON text (SQLite), so the SQL text never changes and is never recompiled.
_PG = {
    "insert": f"""
        INSERT INTO records ({_INSERTED})
        SELECT %(tenant_id)s::int, %(scope)s::text, u.r->>0, 'in_progress', u.r->>1, 1, 1,
               u.r->>2, %(now)s::bigint, %(lease_until)s::bigint, %(on_stale)s::text,
               %(now)s::bigint, %(now)s::bigint, %(expires_at)s::bigint, 0, u.r->>3,
               (u.r->>4)::bigint
        FROM jsonb_array_elements(%(rows)s::jsonb) WITH ORDINALITY AS u(r, n)
        ORDER BY u.n
        ON CONFLICT (tenant_id, scope, key) DO NOTHING
        RETURNING {COLUMNS}""",
    # Locked in key order, as the insert took its keys: concurrent batches cannot deadlock.
    "losers": f"""
        SELECT {COLUMNS} FROM records
        WHERE tenant_id = %(tenant_id)s AND scope = %(scope)s AND key = ANY(%(keys)s::text[])
        ORDER BY key FOR UPDATE""",
    "counts": """
        UPDATE records SET duplicate_count = records.duplicate_count + u.n,
                           last_seen_at = %(now)s
        FROM unnest(%(ids)s::bigint[], %(ns)s::bigint[]) AS u(id, n)
        WHERE records.id = u.id""",
}
_SQLITE = {
    "insert": f"""
        INSERT INTO records ({_INSERTED})
        SELECT :tenant_id, :scope, json_extract(value, '$[0]'), 'in_progress',
               json_extract(value, '$[1]'), 1, 1, json_extract(value, '$[2]'), :now,
               :lease_until, :on_stale, :now, :now, :expires_at, 0,
               json_extract(value, '$[3]'), json_extract(value, '$[4]')
        FROM json_each(:rows) WHERE true ORDER BY json_each.key
        ON CONFLICT (tenant_id, scope, key) DO NOTHING
        RETURNING {COLUMNS}""",
    "losers": f"""
        SELECT {COLUMNS} FROM records
        WHERE tenant_id = :tenant_id AND scope = :scope
          AND key IN (SELECT value FROM json_each(:keys))
        ORDER BY key""",
    "counts": """
        UPDATE records SET duplicate_count = duplicate_count + j.n, last_seen_at = :now
        FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS n
              FROM json_each(:pairs)) AS j
        WHERE records.id = j.id""",
}


class BatchSql:
    """The batch claim's three statements: insert-or-nothing of every new key, one read of
    the keys that were there already, and one update of every repeat's counter."""

    def __init__(self, sqlite: bool):
        self.sqlite = sqlite
        self.text = _SQLITE if sqlite else _PG

    def insert(self, cur: Any, shared: dict, rows: list[tuple]) -> list[tuple]:
        """rows: (key, fingerprint, lease_token_hash, version_kind, version), keys in order."""
        # One JSON text on both backends. PostgreSQL, 1,000 rows: psycopg dumps a Python list
        # element by element (a regex search each), so five arrays cost ~4.7 ms of the
        # service's CPU against ~0.8 ms for the JSON, and jsonb_array_elements takes the server
        # ~4.2 ms against ~5.3 ms for unnest of five arrays (json, re-parsed by each ->>: 6.6).
        params = {**shared, "rows": json.dumps(rows, ensure_ascii=False)}
        cur.execute(self.text["insert"], params)
        return cur.fetchall()

    def losers(self, cur: Any, tenant_id: int, scope: str, keys: list[str]) -> list[tuple]:
        keys_param: Any = json.dumps(keys, ensure_ascii=False) if self.sqlite else keys
        cur.execute(self.text["losers"], {"tenant_id": tenant_id, "scope": scope,
                                          "keys": keys_param})
        return cur.fetchall()

    def add_counts(self, cur: Any, counts: dict[int, int], now: int) -> None:
        if not counts:
            return
        if self.sqlite:
            params = {"now": now, "pairs": json.dumps(list(counts.items()))}
        else:
            params = {"now": now, "ids": list(counts), "ns": list(counts.values())}
        cur.execute(self.text["counts"], params)
