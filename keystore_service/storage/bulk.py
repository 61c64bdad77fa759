"""Bulk jobs in SQL: count what a filter matches, start a job with the set it matches fixed
in the same transaction (one row per event), take the next events of a job, write each
event's outcome with the job's progress under the runner's lease, cancel, finish, and find
running jobs whose runner's lease ran out. Tables: storage/bulk_tables.py."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Optional

from sqlalchemy import String, bindparam, cast, func, insert, literal, null, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.domain.bulk import Filter, JobState
from keystore_service.domain.deliveries import DeliveryState
from keystore_service.domain.records import Micros
from keystore_service.storage.bulk_sql import type_glob
from keystore_service.storage.bulk_tables import bulk_job_items, bulk_jobs
from keystore_service.storage.db import Database
from keystore_service.storage.route_tables import hook_destinations
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import hook_attempts, hook_events, hook_sources

J, It, E, S, A = bulk_jobs.c, bulk_job_items.c, hook_events.c, hook_sources.c, hook_attempts.c
D = hook_destinations.c
RUNNING = JobState.RUNNING.value


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    tenant_id: int
    action: str
    filter: str
    force: bool
    state: str
    matched: int
    done: int
    skipped: int
    started_at: Micros
    finished_at: Optional[Micros]
    created_by: str
    idempotency_key: Optional[str]
    request_hash: str
    lease_holder: Optional[str]
    lease_until: Optional[Micros]
    last_error: Optional[str]


@dataclass(frozen=True, slots=True)
class Item:
    """One event of a job, as it is now: its source's name, id and state (None for an
    event purged since the job started)."""

    seq: int
    event_pk: int
    source: Optional[str]
    event_id: Optional[str]
    state: Optional[str]
    destination: Optional[str] = None  # the name of the destination of this delivery


def _last_error() -> Any:
    """The event's newest attempt as the page says it: its error, or "HTTP <status>"."""
    newest = select(func.coalesce(A.error, literal("HTTP ") + cast(A.status_code, String))
                    ).where(A.event_pk == E.id).order_by(A.number.desc(), A.id.desc()).limit(1)
    return newest.scalar_subquery()


def matching(tenant_id: int, f: Filter, is_sqlite: bool) -> Any:
    """SELECT the ids of the tenant's events that `f` matches (another tenant's source of the
    same name is never one of them: the source is looked up within the tenant)."""
    stmt = select(E.id).join(hook_sources, S.id == E.source_id).where(
        E.tenant_id == tenant_id, S.tenant_id == tenant_id)
    if f.destination is not None:
        stmt = stmt.join(hook_destinations, D.id == E.destination_id).where(
            D.tenant_id == tenant_id, D.name == f.destination)
    if f.source is not None:
        stmt = stmt.where(S.name == f.source)
    if f.state is not None:
        stmt = stmt.where(E.state == f.state)
    if f.event_type is not None:
        stmt = stmt.where(type_glob(E.event_type, f.event_type, is_sqlite))
    if f.received_after is not None:
        stmt = stmt.where(E.received_at >= f.received_after)
    if f.received_before is not None:
        stmt = stmt.where(E.received_at < f.received_before)
    if f.last_error is not None:  # a delivered event has no last error
        stmt = stmt.where(E.state != DeliveryState.DELIVERED.value,
                          type_glob(_last_error(), f.last_error, is_sqlite))
    return stmt


class BulkStore:
    def __init__(self, db: Database):
        self.db = db
        self.sqlite = db.sqlite
        d = db.engine.dialect
        cols = [f.name for f in fields(Job) if f.name != "id"]
        ins = (sqlite.insert if db.sqlite else postgresql.insert)(bulk_jobs)
        self._insert = Sql(ins.values({n: bindparam(n) for n in cols}).on_conflict_do_nothing(
            index_elements=["tenant_id", "idempotency_key"]).returning(*bulk_jobs.c), d)
        self._by_key = Sql(select(bulk_jobs).where(J.tenant_id == bindparam("tid"),
                                                   J.idempotency_key == bindparam("key")), d)
        self._get = Sql(select(bulk_jobs).where(J.tenant_id == bindparam("tid"),
                                                J.id == bindparam("id")), d)
        # The runner's statements name the job's tenant too (single-shard on Citus,
        # docs/scaling.md); a job's items carry it as well.
        job = (J.tenant_id == bindparam("tid")) & (J.id == bindparam("id"))
        self._matched = Sql(update(bulk_jobs).where(job).values(
            matched=bindparam("n")).returning(*bulk_jobs.c), d)
        self._next = Sql(select(It.seq, It.event_pk, S.name, E.event_id, E.state, D.name)
                         .select_from(bulk_job_items.join(bulk_jobs, J.id == It.job_id)
                                      .outerjoin(hook_events, (E.id == It.event_pk)
                                                 & (E.tenant_id == J.tenant_id))
                                      .outerjoin(hook_sources, (S.id == E.source_id)
                                                 & (S.tenant_id == J.tenant_id))
                                      .outerjoin(hook_destinations,
                                                 (D.id == E.destination_id)
                                                 & (D.tenant_id == J.tenant_id)))
                         .where(job, It.tenant_id == J.tenant_id, It.outcome.is_(None))
                         .order_by(It.seq).limit(bindparam("limit")), d)
        self._claim = Sql(update(bulk_jobs).where(
            job, J.state == RUNNING,
            or_(J.lease_until.is_(None), J.lease_until < bindparam("now"),
                J.lease_holder == bindparam("holder"))).values(
            lease_holder=bindparam("holder"), lease_until=bindparam("until")
        ).returning(J.id), d)
        self._orphan = Sql(select(bulk_jobs).where(
            J.state == RUNNING, or_(J.lease_until.is_(None), J.lease_until < bindparam("now"))
        ).order_by(J.id).limit(1), d)
        self._item = Sql(update(bulk_job_items).where(
            It.tenant_id == bindparam("tid"), It.job_id == bindparam("id"),
            It.seq == bindparam("seq"), It.outcome.is_(None)).values(
            outcome=bindparam("outcome")).returning(It.seq), d)
        # The progress counts under the runner's lease; a cancel meanwhile is seen in the
        # state returned (the event acted on is counted all the same).
        self._progress = {outcome: Sql(update(bulk_jobs).where(
            job, J.lease_holder == bindparam("holder")).values(
            {outcome: getattr(J, outcome) + 1,
             "lease_until": bindparam("until")}).returning(J.state), d)
            for outcome in ("done", "skipped")}
        self._finish = Sql(update(bulk_jobs).where(
            job, J.lease_holder == bindparam("holder"),
            J.state == RUNNING).values(state=bindparam("state"), finished_at=bindparam("now"),
                                       lease_holder=null(), lease_until=null(),
                                       last_error=bindparam("error")).returning(J.id), d)
        self._cancel = Sql(update(bulk_jobs).where(
            J.tenant_id == bindparam("tid"), J.id == bindparam("id"), J.state == RUNNING
        ).values(state=JobState.CANCELLED.value, finished_at=bindparam("now")
                 ).returning(J.id), d)

    def count(self, tenant_id: int, f: Filter) -> int:
        stmt = select(func.count()).select_from(matching(tenant_id, f, self.sqlite).subquery())
        with self.db.connection() as cur:
            return Sql(stmt, self.db.engine.dialect).one(cur)[0]

    def start(self, values: dict, f: Filter) -> tuple[Job, bool]:
        """A new job (values: every column but id, `matched` 0) with the events `f` matches
        now as its items, in one transaction; or, when the tenant has a job under the same
        idempotency key already, that job and False (the unique constraint decides between
        concurrent starts: the loser's insert does nothing and reads the winner's job)."""
        with self.db.transaction() as cur:
            row = self._insert.one(cur, values)
            if row is None:
                return Job(*self._by_key.one(cur, {"tid": values["tenant_id"],
                                                   "key": values["idempotency_key"]})), False
            job = Job(*row)
            ids = matching(values["tenant_id"], f, self.sqlite).subquery()
            numbered = select(literal(job.id), literal(job.tenant_id),
                              func.row_number().over(order_by=ids.c.id), ids.c.id, null())
            added = Sql(insert(bulk_job_items).from_select(
                ["job_id", "tenant_id", "seq", "event_pk", "outcome"], numbered),
                self.db.engine.dialect
            ).run(cur).rowcount
            return Job(*self._matched.one(cur, {"tid": job.tenant_id, "id": job.id,
                                                "n": added})), True

    def get(self, tenant_id: int, job_id: int) -> Optional[Job]:
        with self.db.connection() as cur:
            row = self._get.one(cur, {"tid": tenant_id, "id": job_id})
        return Job(*row) if row else None

    def claim(self, job: Job, holder: str, now: Micros, until: Micros) -> bool:
        """Take (or renew) the job's lease: it runs and no other runner's lease is live."""
        with self.db.transaction() as cur:
            return self._claim.one(cur, {**_of(job), "holder": holder, "now": now,
                                         "until": until}) is not None

    def orphan(self, now: Micros) -> Optional[Job]:
        """A running job whose runner's lease ran out (its process died or stalled)."""
        with self.db.connection() as cur:
            row = self._orphan.one(cur, {"now": now})
        return Job(*row) if row else None

    def next_items(self, job: Job, limit: int) -> list[Item]:
        with self.db.connection() as cur:
            return [Item(*row) for row in self._next.all(cur, {**_of(job), "limit": limit})]

    def settle(self, job: Job, seq: int, outcome: str, holder: str, until: Micros
               ) -> Optional[str]:
        """Write an event's outcome ("done" | "skipped") and count it, while `holder` holds
        the job; the job's state after it (None: another runner holds it now, nothing was
        written)."""
        try:
            with self.db.transaction() as cur:
                state = self._progress[outcome].one(cur, {**_of(job), "holder": holder,
                                                          "until": until})
                if state is None:
                    return None
                if self._item.one(cur, {**_of(job), "seq": seq, "outcome": outcome}) is None:
                    raise _Taken()  # written already (a runner that stalled): undo the count
                return state[0]
        except _Taken:
            return None

    def finish(self, job: Job, holder: str, state: str, now: Micros,
               error: Optional[str] = None) -> bool:
        with self.db.transaction() as cur:
            return self._finish.one(cur, {**_of(job), "holder": holder, "state": state,
                                          "now": now, "error": error}) is not None

    def cancel(self, tenant_id: int, job_id: int, now: Micros) -> bool:
        """Stop a running job (its runner stops before its next event); False when it is
        not running (or not the tenant's)."""
        with self.db.transaction() as cur:
            return self._cancel.one(cur, {"tid": tenant_id, "id": job_id, "now": now}) \
                is not None


def _of(job: Job) -> dict:
    """What addresses a job: its tenant and its id."""
    return {"tid": job.tenant_id, "id": job.id}


class _Taken(Exception):
    """Raised inside settle's transaction to roll its count back."""


assert [c.name for c in bulk_jobs.c] == [f.name for f in fields(Job)], "column order = Job"
