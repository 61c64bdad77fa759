"""Service-wide secrets in the database (table `service_secrets`), so that every worker of
every instance agrees on them without configuration: the first to need one creates it, the
rest read the one that won.
"""
from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import bindparam, select
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.storage.db import Database
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import service_secrets

S = service_secrets.c


class SecretStore:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        insert = (sqlite if db.sqlite else postgresql).insert(service_secrets).values(
            name=bindparam("name"), value=bindparam("value"))
        self._put = Sql(insert.on_conflict_do_nothing(index_elements=[S.name]), d)
        self._get = Sql(select(S.value).where(S.name == bindparam("name")), d)

    def get_or_create(self, name: str, make: Callable[[], str]) -> str:
        """The secret `name`; created with `make()` if there is none yet. Two processes
        creating it at once both get the one that was stored first (insert-or-nothing, then
        read). Raises errors.Unavailable when the database does not answer."""
        with self.db.connection() as cur:
            row = self._get.one(cur, {"name": name})
            if row is None:
                self._put.run(cur, {"name": name, "value": make()})
                row = self._get.one(cur, {"name": name})
        return row[0]
