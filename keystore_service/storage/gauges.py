"""What /metrics reads from the database at scrape time (right however many workers and
instances there are), and the lease-expiry counter kept there (a cron `keystore reconcile`
counts too)."""
from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, case, func, select
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.domain.deliveries import DeliveryState
from keystore_service.domain.records import SECOND, Micros
from keystore_service.storage.db import Database
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import (
    hook_events,
    hook_sources,
    lease_expiries,
    reviews,
    tenants,
)


class Gauges:
    def __init__(self, db: Database):
        self.db = db
        ins = (sqlite if db.sqlite else postgresql).insert(lease_expiries).values(
            scope=bindparam("scope"), count=bindparam("n"))
        self._count_expiries = Sql(ins.on_conflict_do_update(
            index_elements=[lease_expiries.c.scope],
            set_={"count": lease_expiries.c.count + ins.excluded["count"]}), db.engine.dialect)

    def count_expiries(self, cur: Any, scope: str, n: int) -> None:
        """`n` more leases of `scope` found run out (in the caller's transaction, or one of
        its own without a cursor)."""
        if cur is None:
            with self.db.transaction() as own:
                self._count_expiries.run(own, {"scope": scope, "n": n})
        else:
            self._count_expiries.run(cur, {"scope": scope, "n": n})

    def open_reviews(self, now: Micros, buckets: tuple) -> list[tuple]:
        """(kind, age bucket, count) of open reviews; `buckets` are (seconds, label), the
        last label `ge_7d`."""
        age = case(*[(reviews.c.opened_at > now - s * SECOND, label) for s, label in buckets],
                   else_="ge_7d")
        return self._rows(select(reviews.c.kind, age, func.count())
                          .where(reviews.c.state == "open").group_by(reviews.c.kind, age))

    def lease_expiries(self) -> list[tuple]:
        """(scope, count) in the order the scopes were first counted."""
        return self._rows(select(lease_expiries.c.scope, lease_expiries.c.count)
                          .order_by(lease_expiries.c.id))

    def hook_queues(self) -> list[tuple]:
        """(tenant, source, queued events, received_at of the oldest queued) per source."""
        e, s, t = hook_events.c, hook_sources.c, tenants.c
        return self._rows(select(t.name, s.name, func.count(e.id), func.min(e.received_at))
                          .select_from(hook_sources.join(tenants, t.id == s.tenant_id)
                                       .outerjoin(hook_events, (e.source_id == s.id)
                                                  & (e.state == DeliveryState.QUEUED.value)))
                          .group_by(t.name, s.name))

    def _rows(self, stmt) -> list[tuple]:
        with self.db.connection() as cur:
            return Sql(stmt, self.db.engine.dialect, bound=True).all(cur)
