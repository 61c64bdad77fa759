"""Per-token rate limits (off by default), counted in the database so that the limit holds
across every worker and instance: fixed windows of `window_seconds`, one row per token,
one upsert per request while the limit is on. Over the limit: 429 with Retry-After.
"""
from __future__ import annotations

from sqlalchemy import bindparam, case
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service import errors
from keystore_service.storage.db import Database
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import rate_limits

SECOND = 1_000_000


class RateLimiter:
    def __init__(self, db: Database, limit: int, window_seconds: int, clock):
        self.db, self.limit, self.clock = db, limit, clock
        self.window = window_seconds * SECOND
        L = rate_limits.c
        ins = (sqlite if db.sqlite else postgresql).insert(rate_limits).values(
            token_id=bindparam("token_id"), window_start=bindparam("window"), count=1)
        self._count = Sql(ins.on_conflict_do_update(
            index_elements=[L.token_id],
            set_={"count": case((L.window_start == ins.excluded.window_start, L.count + 1),
                                else_=1),
                  "window_start": ins.excluded.window_start},
        ).returning(L.count), db.engine.dialect)

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def check(self, token_id: int) -> None:
        """Count one request of the token; RateLimited if its window is full."""
        now = self.clock()
        window = now - now % self.window
        with self.db.connection() as cur:
            count = self._count.one(cur, {"token_id": token_id, "window": window})[0]
        if count > self.limit:
            wait = max(1, -(-(window + self.window - now) // SECOND))
            raise errors.RateLimited(
                f"more than {self.limit} requests in {self.window // SECOND} s for this token",
                details={"limit": self.limit, "window_seconds": self.window // SECOND,
                         "retry_after_seconds": wait},
                headers={"Retry-After": str(wait)})
