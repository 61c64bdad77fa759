"""The last delivered version of each key of a newer_wins destination (issue 29, "Ordering
per key"; table hook_versions): read when an event's turn comes, advanced in the
transaction that records an event delivered. Versions are compared by the domain's rule
(routing.newer), which SQL cannot say (instants, exact numbers), so the advance locks the
key's row (an insert that does nothing when it is there, then SELECT ... FOR UPDATE; SQLite
has one writer at a time) and writes only a newer version: two relays racing never move it
back."""
from __future__ import annotations

from typing import Any, Callable, Optional

from sqlalchemy import bindparam, select, update
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.domain.records import Micros
from keystore_service.storage.db import Database
from keystore_service.storage.route_tables import hook_versions
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import hook_events

V, E = hook_versions.c, hook_events.c


class VersionStore:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        mine = (V.tenant_id == bindparam("tid"), V.destination_id == bindparam("did"),
                V.ordering_key == bindparam("key"))
        cols = ("tenant_id", "destination_id", "ordering_key", "version", "event_pk", "at")
        ins = (sqlite.insert if db.sqlite else postgresql.insert)(hook_versions).values(
            {c: bindparam(p) for c, p in zip(cols, ("tid", "did", "key", "version", "eid",
                                                     "now"))})
        self._add = Sql(ins.on_conflict_do_nothing(
            index_elements=["destination_id", "ordering_key"]).returning(V.destination_id), d)
        self._locked = Sql(select(V.version).where(*mine).with_for_update(), d)
        self._move = Sql(update(hook_versions).where(*mine).values(
            version=bindparam("version"), event_pk=bindparam("eid"), at=bindparam("now")), d)
        self._last = Sql(select(V.version, E.event_id).select_from(hook_versions.outerjoin(
            hook_events, (E.id == V.event_pk) & (E.tenant_id == V.tenant_id))).where(*mine), d)

    def last(self, tenant_id: int, destination_id: int, key: str
             ) -> Optional[tuple[str, Optional[str]]]:
        """The key's last version delivered to the destination (canonical JSON) and the event
        id that carried it (None when that event is forgotten); None when none was."""
        with self.db.connection() as cur:
            row = self._last.one(cur, {"tid": tenant_id, "did": destination_id, "key": key})
        return (row[0], row[1]) if row else None

    def advance(self, cur: Any, tenant_id: int, destination_id: int, key: str, version: str,
                event_pk: int, now: Micros, newer: Callable[[str], Optional[bool]]) -> bool:
        """In the caller's transaction: `version` (canonical JSON) becomes the key's last
        delivered one when there is none, or when newer(stored) is True; False when it was
        left (an equal, older or incomparable version stays)."""
        params = {"tid": tenant_id, "did": destination_id, "key": key, "version": version,
                  "eid": event_pk, "now": now}
        if self._add.one(cur, params) is not None:
            return True
        stored = self._locked.one(cur, params)
        if stored is None or newer(stored[0]) is not True:
            return False
        self._move.run(cur, params)
        return True
