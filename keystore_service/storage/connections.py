"""A tenant's connections (issue 28, "Outbound"), in SQL: the named downstream APIs a send
goes to. Every statement names its tenant (single-shard on Citus, docs/scaling.md) but
`_by_any_id`, the sender's look-up of a due send's connection when it is given no tenant.
The headers stay sealed here (`sealed`, opened by gateway/connections.Connections); the
JSON columns (`header_names`, `rate`, `check_spec`) are parsed into the Connection."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from sqlalchemy import bindparam, delete, func, or_, select, update

from keystore_service import errors
from keystore_service.domain.records import Micros
from keystore_service.domain.sends import SendState
from keystore_service.storage.db import Database
from keystore_service.storage.send_tables import connections, sends
from keystore_service.storage.sql import Sql

C, S = connections.c, sends.c
NAMED = (C.tenant_id == bindparam("tenant_id")) & (C.name == bindparam("name"))
# What may change after create (the name does not); `check` is stored as check_spec.
CHANGEABLE = ("base_url", "sealed", "header_names", "idempotency_header", "timeout_seconds",
              "retry_window_seconds", "max_in_flight", "rate", "check")
JSON_FIELDS = ("header_names", "rate", "check")
# A connection with sends in these states cannot be deleted: the sender still needs it.
LIVE = (SendState.QUEUED.value, SendState.SENDING.value, SendState.CHECKING.value)


@dataclass(frozen=True, slots=True)
class Connection:
    id: int
    tenant_id: int
    name: str
    base_url: str
    sealed: str
    header_names: list[str]
    idempotency_header: Optional[str]
    timeout_seconds: int
    retry_window_seconds: int
    max_in_flight: int
    rate: Optional[dict]
    check: Optional[dict]
    created_at: Micros
    updated_at: Micros


class NameTaken(errors.InvalidRequest):
    """The tenant has a connection of that name already (400, as a source's or channel's)."""


class InUse(errors.InProgress):
    """409: the connection still has sends queued, being sent or being checked."""


def _column(field: str) -> str:
    return "check_spec" if field == "check" else field


def _stored(field: str, value: Any) -> Any:
    if field == "header_names":
        return json.dumps(list(value or []))
    if field in JSON_FIELDS and value is not None:
        return json.dumps(value)
    return value


def _connection(row: Optional[tuple]) -> Optional[Connection]:
    if row is None:
        return None
    values = dict(zip([c.name for c in connections.c], row, strict=True))
    return Connection(
        id=values["id"], tenant_id=values["tenant_id"], name=values["name"],
        base_url=values["base_url"], sealed=values["sealed"],
        header_names=json.loads(values["header_names"]),
        idempotency_header=values["idempotency_header"],
        timeout_seconds=values["timeout_seconds"],
        retry_window_seconds=values["retry_window_seconds"],
        max_in_flight=values["max_in_flight"],
        rate=json.loads(values["rate"]) if values["rate"] is not None else None,
        check=json.loads(values["check_spec"]) if values["check_spec"] is not None else None,
        created_at=values["created_at"], updated_at=values["updated_at"])


class ConnectionStore:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        self._sqlite = db.sqlite
        columns = [c.name for c in connections.c if c.name != "id"]
        self._add = Sql(connections.insert().values({n: bindparam(n) for n in columns})
                        .returning(*connections.c), d)
        self._named = Sql(select(connections).where(NAMED), d)
        self._locked = Sql(select(connections).where(NAMED).with_for_update(), d)
        self._by_id = Sql(select(connections).where(
            C.tenant_id == bindparam("tenant_id"), C.id == bindparam("id")), d)
        self._by_any_id = Sql(select(connections).where(C.id == bindparam("id")), d)
        self._of_tenant = Sql(select(connections).where(
            C.tenant_id == bindparam("tenant_id")).order_by(C.name), d)
        self._change = {f: Sql(update(connections).where(NAMED).values(
            {_column(f): bindparam("value"), "updated_at": bindparam("now")}), d)
            for f in CHANGEABLE}
        self._delete = Sql(delete(connections).where(NAMED), d)
        self._live = Sql(select(func.count()).where(
            S.tenant_id == bindparam("tenant_id"), S.connection_id == bindparam("id"),
            or_(*(S.state == state for state in LIVE))), d)

    def get(self, tenant_id: int, name: str, cur: Any = None) -> Optional[Connection]:
        return _connection(self._one(self._named, {"tenant_id": tenant_id, "name": name}, cur))

    def by_id(self, connection_id: int, cur: Any = None,
              tenant_id: Optional[int] = None) -> Optional[Connection]:
        """The connection of that id; give its tenant when known (one shard on Citus)."""
        if tenant_id is None:
            return _connection(self._one(self._by_any_id, {"id": connection_id}, cur))
        return _connection(self._one(self._by_id, {"tenant_id": tenant_id,
                                                   "id": connection_id}, cur))

    def list(self, tenant_id: int) -> list[Connection]:
        with self.db.connection() as cur:
            return [_connection(r) for r in self._of_tenant.all(cur, {"tenant_id": tenant_id})]

    def create(self, tenant_id: int, values: dict, now: Micros) -> Connection:
        """A new connection from `values` (every field of Connection but the ids and times;
        `check` and `rate` may be None); NameTaken when the tenant has that name already."""
        at = now
        params = {_column(f): _stored(f, values.get(f)) for f in CHANGEABLE}
        params |= {"tenant_id": tenant_id, "name": values["name"], "created_at": at,
                   "updated_at": at}
        try:
            with self.db.transaction() as cur:
                if self._named.one(cur, {"tenant_id": tenant_id, "name": values["name"]}):
                    raise NameTaken(self._taken(values["name"]), details={"field": "name"})
                return _connection(self._add.one(cur, params))
        except self.db.integrity_errors:
            if self.get(tenant_id, values["name"]) is None:
                raise  # not the name: a bug, not the caller's
            # a concurrent create took the name first
            raise NameTaken(self._taken(values["name"]), details={"field": "name"}) from None

    def update(self, tenant_id: int, name: str, changes: dict,
               now: Micros) -> Optional[Connection]:
        """The given fields changed (each by its own statement, so two patches of different
        fields both hold), in one transaction; None when there is no such connection."""
        unknown = set(changes) - set(CHANGEABLE)
        if unknown:
            raise ValueError(f"not changeable: {sorted(unknown)}")
        at = now
        key = {"tenant_id": tenant_id, "name": name}
        with self.db.transaction() as cur:
            for field, value in changes.items():
                if self._change[field].run(cur, {**key, "value": _stored(field, value),
                                                 "now": at}).rowcount != 1:
                    return None
            return _connection(self._named.one(cur, key))

    def delete(self, tenant_id: int, name: str) -> bool:
        """Gone (its scopes' settlements with it); False when there was none. InUse while it
        has sends queued, being sent or being checked (the row is locked meanwhile on
        PostgreSQL, so a send cannot be queued on it between the count and the delete)."""
        key = {"tenant_id": tenant_id, "name": name}
        with self.db.transaction() as cur:
            row = (self._named if self._sqlite else self._locked).one(cur, key)
            if row is None:
                return False
            live = self._live.one(cur, {"tenant_id": tenant_id, "id": row[0]})[0]
            if live:
                raise InUse(f"the connection {name!r} has {live} send(s) queued, being sent "
                            "or being checked; delete it once they have settled",
                            details={"sends": live})
            return self._delete.run(cur, key).rowcount == 1

    def live_sends(self, connection: Connection, cur: Any = None) -> int:
        """How many of its sends are queued, being sent or being checked."""
        return self._one(self._live, {"tenant_id": connection.tenant_id,
                                      "id": connection.id}, cur)[0]

    def transaction(self):
        return self.db.transaction()

    def _taken(self, name: str) -> str:
        return f"this tenant has a connection named {name!r} already"

    def _one(self, stmt: Sql, params: dict, cur: Any = None) -> Optional[tuple]:
        if cur is not None:
            return stmt.one(cur, params)
        with self.db.connection() as c:
            return stmt.one(c, params)
