"""Read-only questions the operators' page asks beyond the API: the audit trail of a key,
the operations stuck past their lease, and the newest records of a scope (whether a session
and its token still stand is signins.py's). Every query is limited to one tenant and bounded
in rows.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from sqlalchemy import bindparam, func, null, or_, select

from keystore_service.domain.records import Micros, Record, State
from keystore_service.storage.db import Database
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import records, resolutions

R, A = records.c, resolutions.c
SHOWN = 100  # rows per list: a page a person can read; the rest is one search away


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One resolution: who (token name), when, what, and the record before and after
    (snapshots without the lease token's hash)."""

    id: int
    review_id: Optional[int]
    action: str
    actor: str
    at: Micros
    before: Optional[dict]
    after: Optional[dict]

    def changes(self) -> list[tuple[str, Any, Any]]:
        """(field, before, after) for each field the resolution changed."""
        before, after = self.before or {}, self.after or {}
        return [(name, before.get(name), after.get(name))
                for name in sorted(set(before) | set(after))
                if before.get(name) != after.get(name)]


class Oversight:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        self._audit = Sql(select(A.id, A.review_id, A.action, A.actor, A.at, A.before, A.after)
                          .where(A.tenant_id == bindparam("tenant_id"),
                                 A.scope == bindparam("scope"), A.key == bindparam("key"))
                          .order_by(A.at.desc(), A.id.desc()).limit(bindparam("n")), d)
        ran_out = (R.state == State.IN_PROGRESS.value) & (R.lease_expires_at <= bindparam("now"))
        since = func.coalesce(R.lease_expires_at, R.last_seen_at)
        # Lists show no results: a page of 100 records must not read 100 x 256 KiB.
        listed = [R[n] if n != "result" else null().label("result") for n in R.keys()]
        self._stuck = Sql(select(*listed).where(
            R.tenant_id == bindparam("tenant_id"), R.expires_at > bindparam("now"),
            or_(ran_out, R.state == State.NEEDS_RECONCILIATION.value))
            .order_by(since, R.id).limit(bindparam("n")), d)
        self._of_scope = Sql(select(*listed).where(
            R.tenant_id == bindparam("tenant_id"), R.scope == bindparam("scope"))
            .order_by(R.last_seen_at.desc(), R.id.desc()).limit(bindparam("n")), d)

    def audit_trail(self, tenant_id: int, scope: str, key: str, limit: int = SHOWN) \
            -> list[AuditEntry]:
        """The resolutions of (scope, key) in this tenant, newest first (all incarnations)."""
        with self.db.connection() as cur:
            rows = self._audit.all(cur, {"tenant_id": tenant_id, "scope": scope, "key": key,
                                         "n": limit})
        return [AuditEntry(i, review_id, action, actor, at, _loads(before), _loads(after))
                for i, review_id, action, actor, at, before, after in rows]

    def stuck(self, tenant_id: int, now: Micros, limit: int = SHOWN) -> list[Record]:
        """Unexpired records (without results) whose attempt outlived its lease (in
        progress, lease run out) or waits for reconciliation; the longest stuck first."""
        with self.db.connection() as cur:
            rows = self._stuck.all(cur, {"tenant_id": tenant_id, "now": now, "n": limit})
        return [Record(*row) for row in rows]

    def records_of_scope(self, tenant_id: int, scope: str, limit: int = SHOWN) -> list[Record]:
        """The records of a scope (without results), the most recently seen first."""
        with self.db.connection() as cur:
            rows = self._of_scope.all(cur, {"tenant_id": tenant_id, "scope": scope, "n": limit})
        return [Record(*row) for row in rows]


def _loads(text: Optional[str]) -> Optional[dict]:
    return json.loads(text) if text else None
