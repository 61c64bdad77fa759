"""The sealing keys' check value in SQL (table `sealing_check`, one row) and the sealed
values it is checked against (hook_sources.sealed). service/sealing.py decides what they
mean; nothing here opens anything."""
from __future__ import annotations

from typing import Optional

from sqlalchemy import bindparam, select, update
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.storage.db import Database
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import hook_sources, sealing_check

C = sealing_check.c
SAMPLE = 16  # sealed sources tried when there is no check value yet: enough to find one a
# key opens among a few sealed with a removed key, few enough to stay a millisecond


class CheckStore:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        insert = (sqlite if db.sqlite else postgresql).insert(sealing_check).values(
            id=1, value=bindparam("value"), sealed_at=bindparam("now"))
        self._put = Sql(insert.on_conflict_do_nothing(index_elements=[C.id]), d)
        self._get = Sql(select(C.value).where(C.id == 1), d)
        self._swap = Sql(update(sealing_check).where(
            C.id == 1, C.value == bindparam("old")).values(
            value=bindparam("new"), sealed_at=bindparam("now")), d)
        self._sealed = Sql(select(hook_sources.c.sealed).order_by(
            hook_sources.c.id.desc()).limit(SAMPLE), d)

    def get(self) -> Optional[str]:
        """The check value; None before anything was sealed. Raises errors.Unavailable."""
        with self.db.connection() as cur:
            row = self._get.one(cur)
        return row[0] if row else None

    def put_first(self, value: str, now: int) -> str:
        """Store `value` unless a check value is there already; the one stored (two
        processes at once: both get the first one's)."""
        with self.db.connection() as cur:
            self._put.run(cur, {"value": value, "now": now})
            return self._get.one(cur)[0]

    def replace(self, old: str, new: str, now: int) -> None:
        """`new` instead of `old` (the same text sealed with another key); nothing if
        another process replaced `old` first."""
        with self.db.connection() as cur:
            self._swap.run(cur, {"old": old, "new": new, "now": now})

    def sealed_samples(self) -> list[str]:
        """Up to SAMPLE sources' sealed values, the newest first; [] when none is sealed."""
        with self.db.connection() as cur:
            return [row[0] for row in self._sealed.all(cur)]
