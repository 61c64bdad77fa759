"""The sweeper's step for the issues' history (issue 27 left it growing): notices that are
done with (sent, given up, folded into an "N more") and resolved issues go once they are
older than `keep_issues_days`. A flapping destination opens and resolves an issue, with a
notice per channel each way, as often as it flaps: without this step those rows would grow
with every flap for as long as the service runs, the one table a tenant could fill for all.

What a person may still need stays: a live issue (open, acknowledged, or ignored and not yet
cleared) and every notice not yet done (queued, being sent, held by the hourly bound), and
an issue goes only after its last notice went. Each call deletes at most `BATCH` rows of
each table, in the sweep's own transaction; the sweep runs every few minutes, so a backlog
of old history drains over a few runs without a long transaction."""
from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, delete, exists, or_, select

from keystore_service.domain.issues import NoticeState
from keystore_service.domain.records import SECOND, Micros
from keystore_service.storage.alert_tables import alert_notices, issues
from keystore_service.storage.db import Database
from keystore_service.storage.sql import Sql

BATCH = 10_000  # rows of each table per sweep: a short delete, far above any notice rate
DONE = (NoticeState.SENT.value, NoticeState.FAILED.value, NoticeState.FOLDED.value)
N, T = alert_notices.c, issues.c


class AlertHistory:
    def __init__(self, db: Database, keep_days: int):
        self.keep = keep_days * 86_400 * SECOND
        d = db.engine.dialect
        old_notices = (select(N.id).where(or_(*(N.state == s for s in DONE)), N.created_at <= bindparam("cutoff"))
                       .limit(BATCH))
        self._notices = Sql(delete(alert_notices).where(
            N.id.in_(old_notices.scalar_subquery())), d)
        old = issues.alias("old")  # its own name: the delete's table is not correlated in
        unnoticed = ~exists().where(N.issue_id == old.c.id)
        old_issues = (select(old.c.id).where(old.c.resolved_at.is_not(None),
                                             old.c.resolved_at <= bindparam("cutoff"),
                                             unnoticed)
                      .limit(BATCH))
        self._issues = Sql(delete(issues).where(T.id.in_(old_issues.scalar_subquery())), d)

    def forget(self, cur: Any, now: Micros) -> tuple[int, int]:
        """One sweep's step: (notices, issues) deleted."""
        cutoff = {"cutoff": now - self.keep}
        gone = self._notices.run(cur, cutoff).rowcount
        return gone, self._issues.run(cur, cutoff).rowcount
