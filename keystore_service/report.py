"""The daily reconciliation report, per scope: what was claimed and how it ended, what is
still open, how many duplicates were suppressed, and the duplicate effects that slipped
through (one result.resource_id shared by two keys of a scope).

Day boundaries are UTC. Counts of attempts are by the day they started or ended; duplicates
suppressed and mismatches are attributed to the day their operation (or review) was first
seen; in progress and waiting for review are as they stand when the report is made.
"""
from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import func, select

from . import domain
from .db import Database
from .sql import Sql
from .tables import attempts, records, reviews

R, A, V = records.c, attempts.c, reviews.c
SHARED_IDS_SHOWN = 20  # per scope: enough to act on, bounded for a huge incident


def day_bounds(day: date) -> tuple[int, int]:
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    to_us = lambda t: int((t - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) \
        * domain.SECOND
    return to_us(start), to_us(start + timedelta(days=1))


class Reports:
    def __init__(self, db: Database):
        self.db = db

    def _rows(self, cur, stmt) -> list[tuple]:
        return Sql(stmt, self.db.engine.dialect, bound=True).all(cur)

    def daily(self, tenant_id: int, day: date, now: int) -> dict:
        start, end = day_bounds(day)
        scopes: dict[str, dict] = defaultdict(lambda: dict.fromkeys(
            ("claimed", "succeeded", "failed", "released", "taken_over", "resolved",
             "in_progress", "waiting_for_review", "duplicates_suppressed", "mismatches"), 0))
        mine = R.tenant_id == tenant_id
        with self.db.connection() as cur:
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
                scopes[scope]["duplicates_suppressed"] = int(n or 0)
            for scope, n in self._rows(cur, select(V.scope, func.count()).where(
                    V.tenant_id == tenant_id, V.state == "open").group_by(V.scope)):
                scopes[scope]["waiting_for_review"] = n
            for scope, n in self._rows(cur, select(V.scope, func.sum(V.count)).where(
                    V.tenant_id == tenant_id, V.kind == "fingerprint_mismatch",
                    V.opened_at >= start, V.opened_at < end).group_by(V.scope)):
                scopes[scope]["mismatches"] = int(n or 0)
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
        out = []
        for n in range(days - 1, -1, -1):
            day = today - timedelta(days=n)
            start, end = day_bounds(day)
            with self.db.connection() as cur:
                total = self._rows(cur, select(func.coalesce(func.sum(R.duplicate_count), 0))
                                   .where(R.tenant_id == tenant_id, R.first_seen_at >= start,
                                          R.first_seen_at < end))[0][0]
            out.append((day.isoformat(), int(total)))
        return out
