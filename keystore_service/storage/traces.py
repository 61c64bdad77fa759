"""Late repeats in SQL: the traces the sweeper leaves of purged finished records, the late
repeats seen, and the batched purge of both after their own window."""
from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, delete, or_, select
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.domain.records import FINISHED, Micros, Trace
from keystore_service.storage.db import Database
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import late_repeats, late_traces, records

R, T, L = records.c, late_traces.c, late_repeats.c


class TraceStore:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        self._note = Sql(late_repeats.insert().values(
            {c.name: bindparam(c.name) for c in late_repeats.c if c.name != "id"}), d)
        self._of_key = Sql(select(L.at, L.policy, L.first_seen_at, L.expired_at,
                                  L.resource_id).where(
            L.tenant_id == bindparam("tenant_id"), L.scope == bindparam("scope"),
            L.key == bindparam("key")).order_by(L.at.desc()).limit(20), d)
        self._dialect = (sqlite if db.sqlite else postgresql)
        self._d = d

    def note(self, cur: Any, tenant_id: int, scope: str, key: str, trace: Trace, policy: str,
             now: Micros) -> None:
        self._note.run(cur, {"tenant_id": tenant_id, "scope": scope, "key": key, "at": now,
                             "policy": policy, "first_seen_at": trace.first_seen_at,
                             "expired_at": trace.expired_at,
                             "resource_id": trace.resource_id})

    def of_key(self, tenant_id: int, scope: str, key: str) -> list[tuple]:
        """The key's late repeats, newest first: (at, policy, first_seen_at, expired_at,
        resource_id)."""
        with self.db.connection() as cur:
            return self._of_key.all(cur, {"tenant_id": tenant_id, "scope": scope, "key": key})

    def keep(self, cur: Any, record_ids: list[int]) -> None:
        """Traces of the finished records among `record_ids` (about to be purged); a key's
        newer trace replaces its older one."""
        if not record_ids:
            return
        chosen = select(R.tenant_id, R.scope, R.key, R.fingerprint, R.result_resource_id,
                        R.first_seen_at, R.expires_at).where(
            R.id.in_(record_ids), R.fingerprint.is_not(None),
            or_(*(R.state == s for s in sorted(FINISHED))))
        ins = self._dialect.insert(late_traces).from_select(
            ["tenant_id", "scope", "key", "fingerprint", "resource_id", "first_seen_at",
             "expired_at"], chosen)
        excluded = ins.excluded
        stmt = ins.on_conflict_do_update(
            index_elements=[T.tenant_id, T.scope, T.key],
            set_={n: excluded[n] for n in ("fingerprint", "resource_id", "first_seen_at",
                                           "expired_at")})
        Sql(stmt, self._d, bound=True).run(cur)

    def forget(self, cur: Any, before: Micros, batch: int) -> int:
        """At most about `batch` traces whose window ended before `before`, and late repeats
        seen before it (the sweeper calls this until it returns less than `batch`)."""
        gone = 0
        for table, column in ((late_traces, T.expired_at), (late_repeats, L.at)):
            first = select(column).where(column < before).order_by(column).limit(batch)
            stmt = delete(table).where(column < before, column.in_(first.scalar_subquery()))
            gone += Sql(stmt, self._d, bound=True).run(cur).rowcount or 0
        return gone
