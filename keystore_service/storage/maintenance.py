"""The background jobs' SQL: the stale leases the reconciler takes, the expired records the
sweeper purges (with their open reviews closed as `purged`), the kept payloads of expired
records, and the job lock that lets one worker of all instances do a timed run. Rows are
taken with FOR UPDATE SKIP LOCKED on PostgreSQL (SQLite's write lock serialises). What
qualifies mirrors domain.reconcile_due and domain.sweepable (tested to agree)."""
from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, delete, null, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.domain.records import Micros, OnStale, Record, State
from keystore_service.storage.db import Database
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import job_locks, kept_payloads, records, reviews

R = records.c


class Maintenance:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        stale = (select(records).where(
            R.state == State.IN_PROGRESS.value, R.on_stale == OnStale.RECONCILE.value,
            R.lease_expires_at <= bindparam("now"),
            R.expires_at > bindparam("now")).order_by(R.lease_expires_at)
            .limit(bindparam("n")))
        doomed = (select(R.id).where(
            R.expires_at <= bindparam("cutoff"),
            or_(R.state != State.IN_PROGRESS.value, R.lease_expires_at <= bindparam("now")),
            or_(R.review_id.is_(None), R.expires_at <= bindparam("cutoff_unresolved")))
            .limit(bindparam("n")))
        if not db.sqlite:
            stale = stale.with_for_update(skip_locked=True)
            doomed = doomed.with_for_update(skip_locked=True)
        self._stale = Sql(stale, d)
        self._doomed = Sql(doomed, d)
        ins = (sqlite if db.sqlite else postgresql).insert(job_locks).values(
            name=bindparam("name"), holder=bindparam("holder"), expires_at=bindparam("until"))
        self._lock = Sql(ins.on_conflict_do_update(
            index_elements=[job_locks.c.name],
            set_={"holder": ins.excluded.holder, "expires_at": ins.excluded.expires_at},
            where=or_(job_locks.c.expires_at <= bindparam("now"),
                      job_locks.c.holder == ins.excluded.holder),
        ).returning(job_locks.c.holder), d)

    def stale(self, cur: Any, now: Micros, n: int) -> list[Record]:
        """Up to `n` records the reconciler must move (domain.reconcile_due), oldest first."""
        return [Record(*row) for row in self._stale.all(cur, {"now": now, "n": n})]

    def doomed(self, cur: Any, now: Micros, cutoff: Micros, cutoff_unresolved: Micros,
               n: int) -> list[int]:
        """Ids of up to `n` records the sweeper may purge (domain.sweepable)."""
        return [row[0] for row in self._doomed.all(cur, {
            "now": now, "cutoff": cutoff, "cutoff_unresolved": cutoff_unresolved, "n": n})]

    def purge(self, cur: Any, ids: list[int], now: Micros) -> int:
        """Delete these records; their open reviews close as `purged` (kept for the audit,
        without a kept body). Returns how many records went."""
        d = self.db.engine.dialect
        Sql(update(reviews).where(reviews.c.state == "open", reviews.c.record_id.in_(ids))
            .values(state="resolved", resolution="purged", resolved_at=now, updated_at=now,
                    kept=null()), d, bound=True).run(cur)
        return Sql(delete(records).where(R.id.in_(ids)), d, bound=True).run(cur).rowcount

    def forget_kept(self, cur: Any, now: Micros) -> None:
        """Kept payloads go when their record expires, also one kept past its expiry for
        an open review (docs/api.md); the reviews' kept copies with them."""
        expired = select(R.id).where(R.expires_at <= now, or_(
            R.state != State.IN_PROGRESS.value, R.lease_expires_at <= now))
        d = self.db.engine.dialect
        Sql(delete(kept_payloads).where(kept_payloads.c.record_id.in_(expired)),
            d, bound=True).run(cur)
        Sql(update(reviews).where(reviews.c.kept.is_not(None),
                                  reviews.c.record_id.in_(expired)).values(kept=null()),
            d, bound=True).run(cur)

    def lock(self, name: str, holder: str, now: Micros, until: Micros) -> bool:
        """Take or renew the job lock `name` until `until`; False while another holds it."""
        with self.db.connection() as cur:
            return self._lock.one(cur, {"name": name, "holder": holder, "now": now,
                                        "until": until}) is not None
