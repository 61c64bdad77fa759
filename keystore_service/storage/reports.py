"""The daily reconciliation report, per scope: what was claimed and how it ended, what is
still open, how many duplicates were suppressed, and the duplicate effects that slipped
through (one result.resource_id shared by two keys of a scope).

Day boundaries are UTC. Counts of attempts are by the day they started or ended; duplicates
suppressed and mismatches are attributed to the day their operation (or review) was first
seen; in progress and waiting for review are as they stand when the report is made.

The counted figures do not change when the sweeper purges records: in the transaction that
deletes them, it adds what they counted to `report_counts` (`keep`), and a report reads the
live records and those counts in one snapshot, so it never sees a record both in the table
and in the counts, or in neither. Mismatches come from reviews, which are never purged.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.domain import records as domain
from keystore_service.storage.db import Database
from keystore_service.storage.record_checks import REPORTED, outbound_counts
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import (
    REPORT_COUNTS,
    attempts,
    late_repeats,
    records,
    report_counts,
    reviews,
)

R, A, V, K, LR = records.c, attempts.c, reviews.c, report_counts.c, late_repeats.c
SHARED_IDS_SHOWN = 20  # per scope: enough to act on, bounded for a huge incident
DAY = 86_400 * domain.SECOND
EPOCH = date(1970, 1, 1)
RUNNING = ("in_progress", "needs_reconciliation")  # their attempt is on the record, not in history


def day_bounds(day: date) -> tuple[int, int]:
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    to_us = lambda t: int((t - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) \
        * domain.SECOND
    return to_us(start), to_us(start + timedelta(days=1))


def day_of(instant: domain.Micros) -> str:
    """The UTC day of an instant, as "YYYY-MM-DD"."""
    return (EPOCH + timedelta(days=instant // DAY)).isoformat()


class Reports:
    def __init__(self, db: Database):
        self.db = db
        ins = (sqlite if db.sqlite else postgresql).insert(report_counts).values(
            {c.name: bindparam(c.name) for c in report_counts.c})
        self._add = Sql(ins.on_conflict_do_update(
            index_elements=[K.tenant_id, K.scope, K.day],
            set_={n: K[n] + ins.excluded[n] for n in REPORT_COUNTS}), db.engine.dialect)

    def _rows(self, cur, stmt) -> list[tuple]:
        return Sql(stmt, self.db.engine.dialect, bound=True).all(cur)

    @contextmanager
    def _snapshot(self) -> Iterator[Any]:
        """A cursor whose reads all see one state of the database (see the module's doc)."""
        with self.db.connection() as cur:
            # SQLite (WAL): a deferred transaction reads one snapshot from its first read on,
            # and takes no write lock. PostgreSQL: READ COMMITTED would take a new snapshot
            # per statement.
            cur.execute("BEGIN" if self.db.sqlite
                        else "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            try:
                yield cur
            except BaseException:
                try:
                    cur.execute("ROLLBACK")
                except Exception:  # a broken connection must not hide the first error
                    pass
                raise
            cur.execute("COMMIT")

    def keep(self, cur, record_ids: list[int]) -> None:
        """Add what the report counts of these records to `report_counts`, on the caller's
        cursor: the sweeper calls it in the transaction that deletes them."""
        if not record_ids:
            return
        adds: dict[tuple, Counter] = defaultdict(Counter)
        for tenant_id, scope, acquired, ended, ending in self._rows(cur, select(
                R.tenant_id, R.scope, A.acquired_at, A.ended_at, A.ending)
                .select_from(attempts.join(records, A.record_id == R.id))
                .where(R.id.in_(record_ids))):
            adds[(tenant_id, scope, day_of(acquired))]["claimed"] += 1
            adds[(tenant_id, scope, day_of(ended))][ending] += 1
        for tenant_id, scope, state, acquired, first_seen, duplicates in self._rows(cur, select(
                R.tenant_id, R.scope, R.state, R.lease_acquired_at, R.first_seen_at,
                R.duplicate_count).where(R.id.in_(record_ids))):
            if state in RUNNING and acquired is not None:
                adds[(tenant_id, scope, day_of(acquired))]["claimed"] += 1
            if duplicates:
                adds[(tenant_id, scope, day_of(first_seen))]["duplicates_suppressed"] += \
                    duplicates
        for (tenant_id, scope, day), counts in sorted(adds.items()):  # one lock order
            self._add.run(cur, {"tenant_id": tenant_id, "scope": scope, "day": day,
                                **{n: counts[n] for n in REPORT_COUNTS}})

    def forget_before(self, cur, day: date) -> int:
        """Purge the kept counts of the days before `day`; returns how many rows went."""
        return Sql(delete(report_counts).where(K.day < day.isoformat()),
                   self.db.engine.dialect, bound=True).run(cur).rowcount

    def daily(self, tenant_id: int, day: date, now: int) -> dict:
        start, end = day_bounds(day)
        scopes: dict[str, dict] = defaultdict(lambda: dict.fromkeys(
            ("claimed", "succeeded", "failed", "released", "taken_over", "resolved",
             "in_progress", "waiting_for_review", "duplicates_suppressed", "mismatches",
             "late_repeats", *REPORTED), 0))
        mine = R.tenant_id == tenant_id
        with self._snapshot() as cur:
            for scope, *kept in self._rows(cur, select(K.scope, *[K[n] for n in REPORT_COUNTS])
                                           .where(K.tenant_id == tenant_id,
                                                  K.day == day.isoformat())):
                for name, n in zip(REPORT_COUNTS, kept, strict=True):
                    scopes[scope][name] += n  # of records purged since
            for scope, n in self._rows(cur, select(R.scope, func.count()).select_from(
                    attempts.join(records, A.record_id == R.id)).where(
                    mine, A.acquired_at >= start, A.acquired_at < end).group_by(R.scope)):
                scopes[scope]["claimed"] += n
            for scope, n in self._rows(cur, select(R.scope, func.count()).where(
                    mine, R.state.in_(("in_progress", "needs_reconciliation")),
                    R.lease_acquired_at >= start, R.lease_acquired_at < end)
                    .group_by(R.scope)):
                scopes[scope]["claimed"] += n  # attempts still running are not in history
            for scope, ending, n in self._rows(cur, select(R.scope, A.ending, func.count())
                                               .select_from(attempts.join(records,
                                                                          A.record_id == R.id))
                                               .where(mine, A.ended_at >= start,
                                                      A.ended_at < end)
                                               .group_by(R.scope, A.ending)):
                scopes[scope][ending] += n
            for scope, n in self._rows(cur, select(R.scope, func.count()).where(
                    mine, R.state == "in_progress", R.first_seen_at < end).group_by(R.scope)):
                scopes[scope]["in_progress"] = n
            for scope, n in self._rows(cur, select(R.scope, func.sum(R.duplicate_count)).where(
                    mine, R.first_seen_at >= start, R.first_seen_at < end).group_by(R.scope)):
                scopes[scope]["duplicates_suppressed"] += int(n or 0)
            for scope, n in self._rows(cur, select(V.scope, func.count()).where(
                    V.tenant_id == tenant_id, V.state == "open").group_by(V.scope)):
                scopes[scope]["waiting_for_review"] = n
            for scope, n in self._rows(cur, select(V.scope, func.sum(V.count)).where(
                    V.tenant_id == tenant_id, V.kind == "fingerprint_mismatch",
                    V.opened_at >= start, V.opened_at < end).group_by(V.scope)):
                scopes[scope]["mismatches"] = int(n or 0)
            for scope, n in self._rows(cur, select(LR.scope, func.count()).where(
                    LR.tenant_id == tenant_id, LR.at >= start, LR.at < end).group_by(LR.scope)):
                scopes[scope]["late_repeats"] = n  # kept beyond the records (tables.py)
            for scope, counts in outbound_counts(cur, self.db.engine.dialect, tenant_id, start,
                                                 end).items():
                scopes[scope].update(counts)  # outbound sends and the checks' settlements
            shared = self._shared_resource_ids(cur, tenant_id)
        out = []
        for scope in sorted(set(scopes) | set(shared)):
            out.append({"scope": scope, **scopes[scope],
                        "shared_resource_ids": shared.get(scope, [])})
        return {"date": day.isoformat(), "generated_at": now, "scopes": out}

    def _shared_resource_ids(self, cur, tenant_id: int) -> dict[str, list]:
        dup = (select(R.scope, R.result_resource_id).where(
            R.tenant_id == tenant_id, R.result_resource_id.is_not(None))
            .group_by(R.scope, R.result_resource_id).having(func.count() > 1).subquery())
        rows = self._rows(cur, select(R.scope, R.result_resource_id, R.key).join(
            dup, (dup.c.scope == R.scope) & (dup.c.result_resource_id == R.result_resource_id))
            .where(R.tenant_id == tenant_id).order_by(R.scope, R.result_resource_id, R.key))
        found: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        for scope, resource_id, key in rows:
            found[scope][resource_id].append(key)
        return {scope: [{"resource_id": rid, "keys": keys}
                        for rid, keys in list(ids.items())[:SHARED_IDS_SHOWN]]
                for scope, ids in found.items()}

    def duplicates_per_day(self, tenant_id: int, days: int, today: date) -> list[tuple[str, int]]:
        """Duplicates suppressed per day (by first seen), oldest first, for the chart."""
        first = today - timedelta(days=days - 1)
        totals: Counter = Counter()
        with self._snapshot() as cur:
            for day, n in self._rows(cur, select(K.day, func.sum(K.duplicates_suppressed))
                                     .where(K.tenant_id == tenant_id,
                                            K.day >= first.isoformat(),
                                            K.day <= today.isoformat()).group_by(K.day)):
                totals[day] += int(n or 0)
            for n in range(days):
                day = first + timedelta(days=n)
                start, end = day_bounds(day)
                totals[day.isoformat()] += int(self._rows(cur, select(
                    func.coalesce(func.sum(R.duplicate_count), 0)).where(
                    R.tenant_id == tenant_id, R.first_seen_at >= start,
                    R.first_seen_at < end))[0][0])
        return [((first + timedelta(days=n)).isoformat(),
                 totals[(first + timedelta(days=n)).isoformat()]) for n in range(days)]
