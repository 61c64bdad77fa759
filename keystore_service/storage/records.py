"""Atomic storage of records: one conditional write per decision, never read-then-write.

- `claim`: one INSERT ... ON CONFLICT statement. It inserts a new record (acquired), or
  counts a repeat that the domain answers without a change of state (replay, in progress,
  needs reconciliation), or does nothing and returns no row: the caller then reads the row,
  lets the domain decide, and writes with `compare_and_set`.
- `compare_and_set`: one UPDATE guarded by everything a decision was based on (incarnation,
  attempt, state, lease token, lease and expiry instants). If another writer got there first
  it matches no row and returns None; the caller decides again on the new row.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Optional

from sqlalchemy import and_, bindparam, literal_column, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.domain import records as domain
from keystore_service.domain.records import FINISHED, Micros, Record, State
from keystore_service.domain.upkeep import INCREMENT
from keystore_service.storage.db import Database
from keystore_service.storage.sql import COLUMNS, BatchSql, Sql
from keystore_service.storage.tables import attempts, kept_payloads, late_traces, records

R = records.c
# What a decision depends on: if none of these moved, the decision still holds.
GUARD = ("incarnation", "attempt", "state", "lease_token_hash", "lease_expires_at", "expires_at")
INSERT_COLUMNS = [c.name for c in records.c if c.name != "id"]


def counted_repeat_sql(row: Any, claim: Any):
    """SQL for the claims the domain answers with Action.COUNT_REPEAT (tested to agree).

    `claim` is the proposed row (`excluded`): its last_seen_at is now, and it carries the
    claim's fingerprint and version. Comparisons with NULL are never true, which is what
    "either side has none" needs. Plain ORs, not IN: an IN list compiles to a parameter that
    is expanded at execution time."""
    now, fp, version = claim.last_seen_at, claim.fingerprint, claim.version
    live = and_(row.state == State.IN_PROGRESS.value, row.lease_expires_at > now)
    not_expired = or_(row.expires_at > now, live)
    same_kind = or_(claim.version_kind.is_(None), row.version_kind.is_(None),
                    row.version_kind == claim.version_kind)
    fp_ok = or_(row.fingerprint.is_(None), fp.is_(None), row.fingerprint == fp)
    finished = or_(*(row.state == s for s in sorted(FINISHED)))
    unversioned = or_(version.is_(None), row.version.is_(None))
    replay = and_(finished, or_(and_(fp_ok, or_(unversioned, version == row.version)),
                                version < row.version))
    # needs_reconciliation repeats are left to the slow path: they also count on the review.
    # A newer version waits for a live lease whatever its fingerprint (contract v1.1).
    waiting = and_(or_(fp_ok, version > row.version), live)
    # A claim repeated after its answer was lost finds its own lease: not a repeat to count
    # (the slow path recognises it by the token's hash and answers acquired).
    not_ours = row.lease_token_hash.is_distinct_from(claim.lease_token_hash)
    return and_(not_expired, same_kind, not_ours, or_(replay, waiting))


class RecordStore:
    def __init__(self, db: Database):
        self.db = db
        dialect = db.engine.dialect
        ins = (sqlite if db.sqlite else postgresql).insert(records).values(
            {name: bindparam(name) for name in INSERT_COLUMNS})
        # The key's trace (a purged record's fingerprint and expiry) comes back with the
        # claim in the same round trip: a late repeat costs a new key no extra query.
        # (The claimed row is named by literal columns: SQLAlchemy renders an INSERT's own
        # columns unqualified, which inside the subquery would mean the trace's columns.)
        T, lt = late_traces.c, late_traces.alias("lt")
        same_key = and_(lt.c.tenant_id == literal_column("records.tenant_id"),
                        lt.c.scope == literal_column("records.scope"),
                        lt.c.key == literal_column('records."key"'))
        trace = [select(column).where(same_key).scalar_subquery()
                 for column in (lt.c.fingerprint, lt.c.expired_at)]
        self._claim = Sql(insert_or_count(ins, trace), dialect)
        self._claims: dict[int, Sql] = {}  # claim_many's statement of each group size
        self._trace_columns = trace
        self._add_counts = Sql(text(_ADD_COUNTS_SQLITE if db.sqlite else _ADD_COUNTS_PG),
                               dialect)
        self._trace = Sql(select(late_traces).where(
            T.tenant_id == bindparam("tenant_id"), T.scope == bindparam("scope"),
            T.key == bindparam("key")), dialect)
        self.batch = BatchSql(db.sqlite)
        self._get = Sql(select(records).where(
            R.tenant_id == bindparam("tenant_id"), R.scope == bindparam("scope"),
            R.key == bindparam("key")), dialect)
        self._by_id = Sql(select(records).where(R.id == bindparam("id")), dialect)
        self._locked = Sql(select(records).where(
            R.id == bindparam("id"), R.tenant_id == bindparam("tid")).with_for_update(), dialect)
        K = kept_payloads.c
        keep = (sqlite if db.sqlite else postgresql).insert(kept_payloads).values(
            record_id=bindparam("record_id"), incarnation=bindparam("incarnation"),
            payload=bindparam("payload"))
        self._keep = Sql(keep.on_conflict_do_update(
            index_elements=[K.record_id], set_={"incarnation": keep.excluded.incarnation,
                                                "payload": keep.excluded.payload}), dialect)
        self._kept = Sql(select(K.payload).where(K.record_id == bindparam("record_id"),
                                                 K.incarnation == bindparam("incarnation")),
                         dialect)
        self._history = Sql(attempts.insert().values(
            {c.name: bindparam(c.name) for c in attempts.c if c.name != "id"}), dialect)
        self._attempts_of = Sql(select(attempts).where(
            attempts.c.record_id == bindparam("record_id")).order_by(attempts.c.id), dialect)
        self._dialect = dialect
        self._cas: dict[tuple, Sql] = {}

    # --- reads -------------------------------------------------------------------------

    def get(self, tenant_id: int, scope: str, key: str, cur: Any = None) -> Optional[Record]:
        params = {"tenant_id": tenant_id, "scope": scope, "key": key}
        if cur is not None:
            row = self._get.one(cur, params)
        else:
            with self.db.connection() as c:
                row = self._get.one(c, params)
        return Record(*row) if row else None

    def keep_payload(self, record: Record, payload: str) -> None:
        """The claim's canonical payload, kept with its record's incarnation (for a person
        to compare with a refused one); a later incarnation's replaces it."""
        with self.db.connection() as cur:
            self._keep.run(cur, {"record_id": record.id, "incarnation": record.incarnation,
                                 "payload": payload})

    def kept_payload(self, cur: Any, record: Record) -> Optional[str]:
        row = self._kept.one(cur, {"record_id": record.id, "incarnation": record.incarnation})
        return row[0] if row else None

    def by_id(self, cur: Any, record_id: int) -> Optional[Record]:
        row = self._by_id.one(cur, {"id": record_id})
        return Record(*row) if row else None

    def lock(self, tenant_id: int, record_id: int) -> tuple[Sql, dict]:
        """The statement that locks the record's row (as locked()), to send with others."""
        return self._locked, {"id": record_id, "tid": tenant_id}

    def locked(self, cur: Any, tenant_id: int, record_id: int) -> Optional[Record]:
        """The record, its row locked till the transaction ends (PostgreSQL: FOR UPDATE;
        SQLite's write lock holds every row already)."""
        row = self._locked.one(cur, {"id": record_id, "tid": tenant_id})
        return Record(*row) if row else None

    def attempt_history(self, record_id: int) -> list[dict]:
        with self.db.connection() as cur:
            rows = self._attempts_of.all(cur, {"record_id": record_id})
        names = [c.name for c in attempts.c]
        return [dict(zip(names, row, strict=True)) for row in rows]

    # --- writes ------------------------------------------------------------------------

    def claim(self, values: dict, cur: Any = None) -> Optional[Record]:
        """Insert the new record, or count a plain repeat; None when the domain must decide.
        On the caller's cursor (inside its transaction) when given one."""
        return self.claim_with_trace(values, cur)[0]

    def claim_with_trace(self, values: dict, cur: Any = None
                         ) -> tuple[Optional[Record], Optional[tuple[str, Micros]]]:
        """As claim(), and the key's trace as (fingerprint, expired_at) when it has one."""
        if cur is not None:
            row = self._claim.one(cur, values)
        else:
            with self.db.connection() as c:
                row = self._claim.one(c, values)
        if not row:
            return None, None
        width = len(records.c)
        return Record(*row[:width]), (row[width], row[width + 1]) if row[width] else None

    def claim_many(self, many: list[dict], cur: Any = None
                   ) -> dict[tuple, tuple[Record, Optional[tuple]]]:
        """claim_with_trace() of several claims (distinct keys) in one statement and one
        commit (group commit, service/grouping.py): by (tenant_id, scope, key), the row and
        trace of each claim whose statement would have returned one. In key order, as every
        multi-row write here, so two groups cannot deadlock on each other's new keys."""
        many = sorted(many, key=lambda v: (v["tenant_id"], v["scope"], v["key"]))
        stmt = self._claims.get(len(many))
        if stmt is None:
            ins = (sqlite if self.db.sqlite else postgresql).insert(records).values(
                [_numbered(i) for i in range(len(many))])
            stmt = self._claims[len(many)] = Sql(
                insert_or_count(ins, self._trace_columns), self._dialect)
        params = {f"g{i}_{name}": value for i, values in enumerate(many)
                  for name, value in values.items()}
        if cur is not None:  # inside the caller's transaction
            rows = stmt.all(cur, params)
        else:
            with self.db.connection() as c:
                rows = stmt.all(c, params)
        width = len(records.c)
        return {(row[1], row[2], row[3]): (
            Record(*row[:width]), (row[width], row[width + 1]) if row[width] else None)
            for row in rows}

    def add_repeat_counts(self, rows: list[tuple[int, int, int, Micros]]) -> None:
        """Add counted repeats, (record id, incarnation, repeats, last seen) each, in one
        statement; an incarnation that has been replaced since is left alone."""
        ids, incarnations, counts, lasts = (list(x) for x in zip(*rows, strict=True))
        if self.db.sqlite:
            params = {"rows": json.dumps(rows)}
        else:
            params = {"ids": ids, "incarnations": incarnations, "counts": counts,
                      "lasts": lasts}
        with self.db.connection() as c:
            self._add_counts.run(c, params)

    def trace(self, cur: Any, tenant_id: int, scope: str, key: str) -> Optional[domain.Trace]:
        row = self._trace.one(cur, {"tenant_id": tenant_id, "scope": scope, "key": key})
        return domain.Trace(*row[3:]) if row else None

    def compare_and_set(self, seen: Record, changes: dict, cur: Any = None,
                        ended: Optional[dict] = None) -> Optional[Record]:
        """Apply `changes` if the record still is as `seen`; write `ended` to the history."""
        stmt = self._cas_statement(tuple(sorted(changes)), tuple(k for k, v in changes.items()
                                                                  if v is INCREMENT))
        params = {k: v for k, v in changes.items() if v is not INCREMENT}
        params["g_id"], params["g_tenant_id"] = seen.id, seen.tenant_id
        for name in GUARD:
            params["g_" + name] = getattr(seen, name)
        if cur is None:
            with self.db.transaction() as c:
                return self._cas_and_history(c, stmt, params, seen, ended)
        return self._cas_and_history(cur, stmt, params, seen, ended)

    def _cas_and_history(self, cur: Any, stmt: Sql, params: dict, seen: Record,
                         ended: Optional[dict]) -> Optional[Record]:
        row = stmt.one(cur, params)
        if row is None:
            return None
        if ended is not None:
            self._history.run(cur, {"record_id": seen.id, "incarnation": seen.incarnation,
                                    "attempt": seen.attempt,
                                    "acquired_at": seen.lease_acquired_at or seen.first_seen_at,
                                    "reason": None, **ended})
        return Record(*row)

    def _cas_statement(self, names: tuple, increments: Iterable[str]) -> Sql:
        key = (names, tuple(increments))
        stmt = self._cas.get(key)
        if stmt is None:
            values = {n: (R[n] + 1 if n in key[1] else bindparam(n)) for n in names}
            # tenant_id is redundant with the id, and names the shard on a distributed
            # database (docs/scaling.md; tests/integration/test_tenant_routing.py).
            where = [R.id == bindparam("g_id"), R.tenant_id == bindparam("g_tenant_id")] + [
                R[n].is_not_distinct_from(bindparam("g_" + n, type_=R[n].type)) for n in GUARD]
            stmt = Sql(update(records).where(*where).values(values).returning(*records.c),
                       self._dialect)
            self._cas[key] = stmt
        return stmt

    def transaction(self):
        return self.db.transaction()


_ADD_COUNTS_PG = """
    UPDATE records SET duplicate_count = records.duplicate_count + u.n,
                       last_seen_at = GREATEST(records.last_seen_at, u.last)
    FROM unnest(:ids ::bigint[], :incarnations ::int[], :counts ::bigint[], :lasts ::bigint[])
         AS u(id, incarnation, n, last)
    WHERE records.id = u.id AND records.incarnation = u.incarnation"""
_ADD_COUNTS_SQLITE = """
    UPDATE records SET duplicate_count = duplicate_count + j.n,
                       last_seen_at = MAX(last_seen_at, j.last)
    FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS incarnation,
                 json_extract(value, '$[2]') AS n, json_extract(value, '$[3]') AS last
          FROM json_each(:rows)) AS j
    WHERE records.id = j.id AND records.incarnation = j.incarnation"""


def insert_or_count(ins: Any, trace: list) -> Any:
    """The claim's statement around an INSERT of one row or several (`ins`)."""
    return ins.on_conflict_do_update(
        index_elements=[R.tenant_id, R.scope, R.key],
        set_={"duplicate_count": R.duplicate_count + 1,
              "last_seen_at": ins.excluded.last_seen_at},
        where=counted_repeat_sql(R, ins.excluded),
    ).returning(*records.c, *trace)


def _numbered(i: int) -> dict:
    """The i-th row of a multi-row claim, its parameters named `g<i>_<column>` (not
    `<column>_<i>`: SQLAlchemy names the `+ 1` of the counter `duplicate_count_1`)."""
    return {name: bindparam(f"g{i}_{name}") for name in INSERT_COLUMNS}


def new_record_values(tenant_id: int, scope: str, key: str, fingerprint: Optional[str],
                      token_hash: str, now: Micros, lease_until: Micros, expires_at: Micros,
                      on_stale: str, version_kind: Optional[str] = None,
                      version: Optional[int] = None) -> dict:
    """The row a first claim inserts: attempt 1 of incarnation 1, in progress."""
    return {"tenant_id": tenant_id, "scope": scope, "key": key,
            "state": State.IN_PROGRESS.value, "fingerprint": fingerprint, "attempt": 1,
            "incarnation": 1, "lease_token_hash": token_hash, "lease_acquired_at": now,
            "lease_expires_at": lease_until, "on_stale": on_stale, "first_seen_at": now,
            "last_seen_at": now, "expires_at": expires_at, "duplicate_count": 0,
            "checkpoint_step": None, "checkpoint_resource_id": None, "checkpoint_at": None,
            "result": None, "version_kind": version_kind, "version": version, "review_id": None,
            "result_resource_id": None}


assert [c.name for c in records.c] == list(domain.Record.__slots__), "column order = Record"
assert [c.name for c in records.c] == COLUMNS.split(", "), "batch statements' column order"
