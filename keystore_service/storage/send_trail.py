"""What the operators' page shows of outbound sends (issue 28): a record's trail (its sends'
requests, each attempt and how it was classified, the checks' runs against the record) and a
tenant's connections' in-flight and queued counts. Read only; every statement names its
tenant and is bounded in rows. Never the sealed request itself: only whether it is still
kept and how large it is sealed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sqlalchemy import bindparam, func, or_, select

from keystore_service.domain.records import Micros
from keystore_service.domain.sends import SendState
from keystore_service.storage.db import Database
from keystore_service.storage.send_tables import record_checks, send_attempts, sends
from keystore_service.storage.sql import Sql

S, A, C = sends.c, send_attempts.c, record_checks.c
SHOWN = 100  # attempts or checks per record: more than a window's backoff ever makes
BUSY = (SendState.SENDING.value, SendState.CHECKING.value)  # a request or check in flight


@dataclass(frozen=True, slots=True)
class SentAttempt:
    """One request a send made: what it came to (`klass`: domain.sends.Class) and up to 512
    characters of the answer."""

    at: Micros
    duration_ms: int
    status_code: Optional[int]
    error: Optional[str]
    klass: str
    answer: Optional[str]


@dataclass(frozen=True, slots=True)
class SendTrail:
    """One send of a record's incarnation, without its sealed request: `sealed_size` is the
    sealed request's length while it is kept (None once dropped, as the send settled)."""

    id: int
    connection_name: str
    incarnation: int
    reference: str
    method: str
    path: str
    resource_id_pointer: Optional[str]
    sealed_size: Optional[int]
    state: str
    attempt_count: int
    unknown: bool
    check_tries: int
    created_at: Micros
    window_end: Micros
    next_attempt_at: Micros
    settled_at: Optional[Micros]
    last_error: Optional[str]
    attempts: tuple[SentAttempt, ...]


@dataclass(frozen=True, slots=True)
class CheckTrail:
    """A check's run against the record: what the destination answered (up to 1 KiB) and
    what it was taken to mean (domain.sends.Verdict)."""

    incarnation: int
    at: Micros
    status_code: Optional[int]
    error: Optional[str]
    verdict: str
    resource_id: Optional[str]
    answer: Optional[str]


class SendTrails:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        mine = (S.tenant_id == bindparam("tenant_id")) & (S.record_id == bindparam("record_id"))
        self._sends = Sql(select(
            S.id, S.connection_name, S.incarnation, S.reference, S.method, S.path,
            S.resource_id_pointer, func.length(S.sealed), S.state, S.attempts, S.unknown,
            S.check_tries, S.created_at, S.window_end, S.next_attempt_at, S.settled_at,
            S.last_error).where(mine).order_by(S.incarnation, S.id).limit(SHOWN), d)
        self._attempts = Sql(select(
            A.send_id, A.at, A.duration_ms, A.status_code, A.error, A["class"], A.answer)
            .select_from(send_attempts.join(sends, S.id == A.send_id)).where(mine)
            .order_by(A.at, A.id).limit(SHOWN), d)
        self._checks = Sql(select(
            C.incarnation, C.at, C.status_code, C.error, C.verdict, C.resource_id, C.answer)
            .where(C.tenant_id == bindparam("tenant_id"), C.record_id == bindparam("record_id"))
            .order_by(C.at, C.id).limit(SHOWN), d)
        self._busy = Sql(select(S.connection_id, S.state, func.count()).where(
            S.tenant_id == bindparam("tenant_id"),
            or_(*(S.state == s for s in (SendState.QUEUED.value, *BUSY))))
            .group_by(S.connection_id, S.state), d)

    def of_record(self, tenant_id: int, record_id: int) -> tuple[list[SendTrail],
                                                                list[CheckTrail]]:
        """The record's sends (oldest incarnation first), each with its attempts, and the
        checks run against it (oldest first)."""
        ids = {"tenant_id": tenant_id, "record_id": record_id}
        with self.db.connection() as cur:
            rows = self._sends.all(cur, ids)
            tried = self._attempts.all(cur, ids) if rows else []
            checks = self._checks.all(cur, ids)
        by_send: dict[int, list[SentAttempt]] = {}
        for send_id, *values in tried:
            by_send.setdefault(send_id, []).append(SentAttempt(*values))
        trails = [SendTrail(*row[:10], bool(row[10]), *row[11:],
                            attempts=tuple(by_send.get(row[0], ())))
                  for row in rows]
        return trails, [CheckTrail(*row) for row in checks]

    def load(self, tenant_id: int) -> dict[int, tuple[int, int]]:
        """Per connection id: (in flight, queued) of the tenant's sends."""
        counts: dict[int, list[int]] = {}
        with self.db.connection() as cur:
            for connection_id, state, n in self._busy.all(cur, {"tenant_id": tenant_id}):
                if connection_id is not None:
                    slot = counts.setdefault(connection_id, [0, 0])
                    slot[0 if state in BUSY else 1] += n
        return {k: (v[0], v[1]) for k, v in counts.items()}
