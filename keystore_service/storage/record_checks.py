"""The checks' runs against records (issue 28, "settlement by asking the destination"), in
SQL: a run written for the trail, the runs of one incarnation, the records the reconciler's
settlement pass asks about, the answers attached to a review a person takes over, and what
the daily report counts of sends and checks. Every method but `due` names its tenant."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Optional

from sqlalchemy import and_, bindparam, exists, func, select, update

from keystore_service.domain.records import Micros, Record, ReviewKind, State
from keystore_service.domain.sends import CHECK_TRIES, Verdict
from keystore_service.storage.db import Database
from keystore_service.storage.send_tables import record_checks, scope_settlements, sends
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import records, reviews

C, R, V, S, SS = record_checks.c, records.c, reviews.c, sends.c, scope_settlements.c
WAITING_KINDS = (ReviewKind.STALE_LEASE.value, ReviewKind.SEND_UNKNOWN.value)


@dataclass(frozen=True, slots=True)
class CheckRow:
    """One run of a check against a record's incarnation, as stored."""

    at: Micros
    status_code: Optional[int]
    error: Optional[str]
    verdict: str
    resource_id: Optional[str]
    answer: Optional[str]


@dataclass(frozen=True, slots=True)
class Due:
    """A plain claim the settlement pass may ask about: its record (needs_reconciliation),
    its open stale_lease review, its scope's settlement, and the runs of its check so far."""

    record: Record
    review_id: int
    connection_id: int
    check_spec: str
    on_absent: str
    tries: int
    last_at: Optional[Micros]


class RecordCheckStore:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        self._add = Sql(record_checks.insert().values(
            {c.name: bindparam(c.name) for c in record_checks.c if c.name != "id"}), d)
        self._of = Sql(select(C.at, C.status_code, C.error, C.verdict, C.resource_id, C.answer)
                       .where(C.tenant_id == bindparam("tenant_id"),
                              C.record_id == bindparam("record_id"),
                              C.incarnation == bindparam("incarnation"))
                       .order_by(C.at, C.id), d)
        self._kept = Sql(update(reviews).where(
            V.tenant_id == bindparam("tenant_id"), V.id == bindparam("review_id"),
            V.state == "open").values(kept=bindparam("kept")), d)
        self._due = Sql(_due_statement(), d)

    def add(self, cur: Any, record: Record, at: Micros, status_code: Optional[int],
            error: Optional[str], verdict: str, resource_id: Optional[str],
            answer: Optional[str]) -> None:
        self._add.run(cur, {"tenant_id": record.tenant_id, "record_id": record.id,
                            "incarnation": record.incarnation, "at": at,
                            "status_code": status_code, "error": error, "verdict": verdict,
                            "resource_id": resource_id, "answer": answer})

    def of(self, cur: Any, record: Record) -> list[CheckRow]:
        """The runs against the record's present incarnation, oldest first."""
        return [CheckRow(*row) for row in self._of.all(cur, {
            "tenant_id": record.tenant_id, "record_id": record.id,
            "incarnation": record.incarnation})]

    def keep_on_review(self, cur: Any, tenant_id: int, review_id: int, kept: str) -> bool:
        """Attach `kept` (JSON: the checks' answers) to an open review; False if it closed."""
        return self._kept.run(cur, {"tenant_id": tenant_id, "review_id": review_id,
                                    "kept": kept}).rowcount == 1

    def due(self, cur: Any, now: Micros, n: int) -> list[Due]:
        """Up to `n` plain claims (no send) in scopes with a settlement, unexpired, in
        needs_reconciliation with an open stale_lease review, whose check has neither found
        nor ruled out the effect and ran fewer than CHECK_TRIES times; the least recently
        asked first. Every tenant's: the pass spans them, as the reconciler does."""
        width = len(records.c)
        return [Due(Record(*row[:width]), *row[width:])
                for row in self._due.all(cur, {"now": now, "n": n})]


REPORTED = ("sent", "settled_found", "settled_absent", "waiting_for_person")


def outbound_counts(cur: Any, dialect: Any, tenant_id: int, start: Micros, end: Micros
                  ) -> dict[str, dict[str, int]]:
    """Per scope, of one day (the daily report's, on its snapshot's cursor): sends made (by
    when they were queued), checks that found the effect or ruled it out, and (as it stands)
    reviews of an unknown outcome open: waiting for a person."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(REPORTED, 0))
    mine = R.tenant_id == tenant_id
    for scope, n in Sql(select(R.scope, func.count()).select_from(
            sends.join(records, (R.id == S.record_id) & (R.tenant_id == S.tenant_id)))
            .where(mine, S.tenant_id == tenant_id, S.created_at >= start,
                   S.created_at < end).group_by(R.scope), dialect, bound=True).all(cur):
        out[scope]["sent"] = n
    for scope, verdict, n in Sql(select(R.scope, C.verdict, func.count()).select_from(
            record_checks.join(records, (R.id == C.record_id) & (R.tenant_id == C.tenant_id)))
            .where(mine, C.tenant_id == tenant_id, C.at >= start, C.at < end,
                   C.verdict != Verdict.UNCLEAR.value).group_by(R.scope, C.verdict),
            dialect, bound=True).all(cur):
        out[scope]["settled_" + verdict] = n
    for scope, n in Sql(select(V.scope, func.count()).where(
            V.tenant_id == tenant_id, V.state == "open", V.kind.in_(WAITING_KINDS))
            .group_by(V.scope), dialect, bound=True).all(cur):
        out[scope]["waiting_for_person"] = n
    return dict(out)


def _due_statement():
    same = and_(C.record_id == R.id, C.incarnation == R.incarnation)
    tries = select(func.count()).where(same).scalar_subquery()
    last_at = select(func.max(C.at)).where(same).scalar_subquery()
    decided = exists().where(same, C.verdict != Verdict.UNCLEAR.value)
    a_send = exists().where(S.record_id == R.id, S.incarnation == R.incarnation)
    return (select(records, V.id, SS.connection_id, SS.check_spec, SS.on_absent, tries,
                   last_at)
            .select_from(records.join(scope_settlements, (SS.tenant_id == R.tenant_id)
                                      & (SS.scope == R.scope))
                         .join(reviews, (V.record_id == R.id) & (V.tenant_id == R.tenant_id)
                               & (V.kind == ReviewKind.STALE_LEASE.value) & (V.state == "open")))
            .where(R.state == State.NEEDS_RECONCILIATION.value, R.expires_at > bindparam("now"),
                   ~decided, ~a_send, tries < CHECK_TRIES)
            .order_by(func.coalesce(last_at, 0), R.id).limit(bindparam("n")))
