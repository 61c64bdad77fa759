"""The operators' page's sessions, kept in the database (table `ui_sessions`): one row per
sign-in, named in the signed cookie by a random id whose SHA-256 is the row's key. A session
lives while its row does and its operator token stands; signing out deletes the row, so a
copy of the cookie stops working at once on every worker of every instance. Rows of sessions
that can no longer live (past their absolute limit) are deleted at the next sign-in.
"""
from __future__ import annotations

import hashlib
from typing import Optional

from sqlalchemy import bindparam, select

from keystore_service.domain.records import SECOND, Micros
from keystore_service.storage.db import Database
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import tokens, ui_sessions

S, T = ui_sessions.c, tokens.c
LIVE, SIGNED_OUT, REVOKED = "live", "signed_out", "revoked"


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class SignIns:
    def __init__(self, db: Database, keep_seconds: float):
        """`keep_seconds`: how long a row may be needed (the session's absolute limit, with
        a margin for instances whose clocks disagree)."""
        self.db, self.keep = db, int(keep_seconds * SECOND)
        d = db.engine.dialect
        self._insert = Sql(ui_sessions.insert().values(
            id_hash=bindparam("h"), tenant_id=bindparam("tenant_id"),
            token_name=bindparam("name"), signed_in_at=bindparam("now")), d)
        self._purge = Sql(ui_sessions.delete().where(S.signed_in_at < bindparam("cutoff")), d)
        self._delete = Sql(ui_sessions.delete().where(S.id_hash == bindparam("h")), d)
        live_token = ((T.tenant_id == S.tenant_id) & (T.name == S.token_name)
                      & (T.role == "operator") & T.revoked_at.is_(None))
        self._state = Sql(select(T.id).select_from(ui_sessions.outerjoin(tokens, live_token))
                          .where(S.id_hash == bindparam("h")), d)

    def start(self, session_id: str, tenant_id: int, token_name: str, now: Micros) -> None:
        """Record a new session (and forget those too old to live). Raises
        errors.Unavailable when the database does not answer."""
        with self.db.connection() as cur:
            self._purge.run(cur, {"cutoff": now - self.keep})
            self._insert.run(cur, {"h": _hash(session_id), "tenant_id": tenant_id,
                                   "name": token_name, "now": now})

    def state(self, session_id: Optional[str]) -> str:
        """LIVE; SIGNED_OUT when there is no such session (signed out, forgotten, or a
        cookie that names none); REVOKED when its operator token was revoked."""
        if not session_id:
            return SIGNED_OUT
        with self.db.connection() as cur:
            row = self._state.one(cur, {"h": _hash(session_id)})
        if row is None:
            return SIGNED_OUT
        return REVOKED if row[0] is None else LIVE

    def end(self, session_id: str) -> None:
        """Sign the session out everywhere (nothing happens if it has ended already)."""
        with self.db.connection() as cur:
            self._delete.run(cur, {"h": _hash(session_id)})
