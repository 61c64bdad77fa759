"""A scope's settlement (issue 28, PUT /v1/scopes/<scope>/settlement), in SQL: the check a
scope's ordinary claims are settled by when their outcome is unknown, on which connection,
and what an absent answer means. One per (tenant, scope); it goes with its connection (the
foreign key cascades). Every statement names its tenant but `_all` (the reconciler's look
over every tenant's scopes)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from sqlalchemy import bindparam, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.domain.records import Micros
from keystore_service.storage.db import Database
from keystore_service.storage.send_tables import scope_settlements
from keystore_service.storage.sql import Sql

SS = scope_settlements.c
ONE = (SS.tenant_id == bindparam("tenant_id")) & (SS.scope == bindparam("scope"))


@dataclass(frozen=True, slots=True)
class ScopeSettlement:
    tenant_id: int
    scope: str
    connection_id: int
    check: dict
    on_absent: str  # domain.sends.OnAbsent
    created_at: Micros = 0
    updated_at: Micros = 0


def _settlement(row: Optional[tuple]) -> Optional[ScopeSettlement]:
    if row is None:
        return None
    tenant_id, scope, connection_id, check_spec, on_absent, created_at, updated_at = row
    return ScopeSettlement(tenant_id, scope, connection_id, json.loads(check_spec), on_absent,
                           created_at, updated_at)


class ScopeSettlementStore:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        columns = (SS.tenant_id, SS.scope, SS.connection_id, SS.check_spec, SS.on_absent,
                   SS.created_at, SS.updated_at)
        self._get = Sql(select(*columns).where(ONE), d)
        ins = (sqlite if db.sqlite else postgresql).insert(scope_settlements).values(
            {c.name: bindparam(c.name) for c in columns})
        self._put = Sql(ins.on_conflict_do_update(
            index_elements=[SS.tenant_id, SS.scope],
            set_={"connection_id": ins.excluded.connection_id,
                  "check_spec": ins.excluded.check_spec, "on_absent": ins.excluded.on_absent,
                  "updated_at": ins.excluded.updated_at}).returning(*columns), d)
        self._delete = Sql(delete(scope_settlements).where(ONE), d)
        self._of_tenant = Sql(select(*columns).where(
            SS.tenant_id == bindparam("tenant_id")).order_by(SS.scope), d)
        self._all = Sql(select(*columns).order_by(SS.tenant_id, SS.scope), d)

    def get(self, tenant_id: int, scope: str, cur: Any = None) -> Optional[ScopeSettlement]:
        params = {"tenant_id": tenant_id, "scope": scope}
        if cur is not None:
            return _settlement(self._get.one(cur, params))
        with self.db.connection() as c:
            return _settlement(self._get.one(c, params))

    def put(self, tenant_id: int, scope: str, connection_id: int, check: dict,
            on_absent: str, now: Micros, cur: Any = None) -> ScopeSettlement:
        """The scope's settlement, made or replaced (its created_at kept when replaced)."""
        at = now
        params = {"tenant_id": tenant_id, "scope": scope, "connection_id": connection_id,
                  "check_spec": json.dumps(check), "on_absent": on_absent,
                  "created_at": at, "updated_at": at}
        if cur is not None:
            return _settlement(self._put.one(cur, params))
        with self.db.transaction() as c:
            return _settlement(self._put.one(c, params))

    def delete(self, tenant_id: int, scope: str, cur: Any = None) -> bool:
        """False when the scope had none."""
        params = {"tenant_id": tenant_id, "scope": scope}
        if cur is not None:
            return self._delete.run(cur, params).rowcount == 1
        with self.db.transaction() as c:
            return self._delete.run(c, params).rowcount == 1

    def of_tenant(self, tenant_id: int) -> list[ScopeSettlement]:
        with self.db.connection() as c:
            return [_settlement(r) for r in self._of_tenant.all(c, {"tenant_id": tenant_id})]

    def scopes_with_settlement(self, cur: Any = None) -> list[ScopeSettlement]:
        """Every tenant's settlements (the reconciler's pass), by tenant and scope."""
        if cur is not None:
            return [_settlement(r) for r in self._all.all(cur)]
        with self.db.connection() as c:
            return [_settlement(r) for r in self._all.all(c)]

    def transaction(self):
        return self.db.transaction()
