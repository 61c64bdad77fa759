"""Issues in SQL: open one (or count on the live one: the partial unique index decides
between watchers of several processes), resolve, act on one for a person, list; and what the
watchers read: each source's state (its oldest queued event through the (source, state,
received_at) index, one step per source, never a read of its queue) and the open reviews
grouped by (tenant, scope, kind)."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Optional

from sqlalchemy import bindparam, case, func, select, text, update
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.domain.deliveries import DeliveryState as Q
from keystore_service.domain.records import Micros, ReviewKind
from keystore_service.domain.sends import SendState
from keystore_service.storage.alert_tables import LIVE, issues
from keystore_service.storage.db import Database
from keystore_service.storage.send_tables import sends
from keystore_service.storage.sql import Sql
from keystore_service.storage.route_tables import hook_destinations
from keystore_service.storage.sources import WITH_DESTINATIONS
from keystore_service.storage.tables import hook_events, hook_sources, reviews

T, S, E, V, D = issues.c, hook_sources.c, hook_events.c, reviews.c, hook_destinations.c
F = hook_destinations.alias("f").c  # a source's destinations, counted
PAGE = 500  # issues per listing, newest first


@dataclass(frozen=True, slots=True)
class Issue:
    id: int
    tenant_id: int
    kind: str
    subject: str
    state: str
    opened_at: Micros
    last_seen_at: Micros
    count: int
    resolved_at: Optional[Micros]
    acknowledged_by: Optional[str]
    detail: Optional[str]


@dataclass(frozen=True, slots=True)
class Watched:
    """A source as the watchers see it."""

    id: int
    tenant_id: int
    name: str
    state: str
    sealed: str
    alert_after_seconds: int
    backlog_alert_seconds: int
    oldest_queued_at: Optional[Micros]


@dataclass(frozen=True, slots=True)
class WatchedDestination:
    """A destination as the watchers see it: its source's, its own failing run, and how
    many destinations its source has (issue subjects: domain/issues.delivery_subject)."""

    tenant_id: int
    source: str
    name: str
    fanout: int
    failing_since: Optional[Micros]
    last_error: Optional[str]
    alert_after_seconds: int


class IssueStore:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        cols = [f.name for f in fields(Issue) if f.name != "id"]
        ins = (sqlite if db.sqlite else postgresql).insert(issues).values(
            {n: bindparam(n) for n in cols})
        self._open = Sql(ins.on_conflict_do_nothing(
            index_elements=[T.tenant_id, T.kind, T.subject], index_where=text(LIVE))
            .returning(*issues.c), d)
        live = (T.tenant_id == bindparam("tenant_id"), T.kind == bindparam("kind"),
                T.subject == bindparam("subject"), T.resolved_at.is_(None))
        self._seen = Sql(update(issues).where(*live).values(
            last_seen_at=bindparam("now"), count=bindparam("count"),
            detail=bindparam("detail")).returning(*issues.c), d)
        self._live = Sql(select(issues).where(T.resolved_at.is_(None)).order_by(T.id), d)
        self._get = Sql(select(issues).where(T.id == bindparam("id"),
                                             T.tenant_id == bindparam("tenant_id")), d)
        self._set = Sql(update(issues).where(
            T.tenant_id == bindparam("tenant_id"), T.id == bindparam("id"),
            T.state == bindparam("old"),
            T.resolved_at.is_(None)).values(
            state=bindparam("state"), resolved_at=bindparam("resolved_at"),
            acknowledged_by=bindparam("by")).returning(*issues.c), d)
        # The oldest event still waiting: queued or being forwarded (an event counted only
        # while queued left the source's backlog at each of its forwards, and the issue
        # resolved and opened again with every retry). One index step per state.
        def first(state: Q) -> Any:
            return select(func.min(E.received_at)).where(
                E.source_id == S.id, E.state == state.value).scalar_subquery()
        queued, delivering = first(Q.QUEUED), first(Q.DELIVERING)
        oldest = case((queued.is_(None), delivering), (delivering.is_(None), queued),
                      (queued <= delivering, queued), else_=delivering)
        self._sources = Sql(select(
            S.id, S.tenant_id, S.name, S.state, S.sealed,
            S.alert_after_seconds, S.backlog_alert_seconds, oldest).select_from(
            hook_sources).order_by(S.id), d)
        fanout = select(func.count()).where(F.source_id == S.id).scalar_subquery()
        self._destinations = Sql(select(
            S.tenant_id, S.name, D.name, fanout, D.failing_since, D.last_error,
            S.alert_after_seconds).select_from(WITH_DESTINATIONS)
            .order_by(S.id, D.position), d)
        self._reviews = Sql(select(V.tenant_id, V.scope, V.kind, func.count()).where(
            V.state == "open").group_by(V.tenant_id, V.scope, V.kind), d)
        failed = V.kind == ReviewKind.DELIVERY_FAILED.value
        self._failed = Sql(select(V.tenant_id, V.scope, V.destination, func.count()).where(
            V.state == "open", failed).group_by(V.tenant_id, V.scope, V.destination), d)
        # Sends waiting for a person: unresolved, their record's send_unknown review open.
        waiting = sends.c.state == SendState.UNRESOLVED.value
        self._sends = Sql(select(sends.c.tenant_id, sends.c.connection_name,
                                 func.count(func.distinct(sends.c.id)))
                          .select_from(sends.join(reviews, (V.record_id == sends.c.record_id)
                                                  & (V.tenant_id == sends.c.tenant_id)))
                          .where(waiting, V.kind == ReviewKind.SEND_UNKNOWN.value,
                                 V.state == "open")
                          .group_by(sends.c.tenant_id, sends.c.connection_name), d)
        self._d = d

    def observe(self, cur: Any, tenant_id: int, kind: str, subject: str, now: Micros,
                detail: Optional[str], count: int) -> tuple[Issue, bool]:
        """The live issue of (tenant, kind, subject), opened now if there is none (True),
        else its `count` and `detail` brought up to date (False)."""
        key = {"tenant_id": tenant_id, "kind": kind, "subject": subject}
        row = self._open.one(cur, {**key, "state": "open", "opened_at": now,
                                   "last_seen_at": now, "count": max(count, 1),
                                   "resolved_at": None, "acknowledged_by": None,
                                   "detail": detail})
        if row is not None:
            return Issue(*row), True
        row = self._seen.one(cur, {**key, "now": now, "count": max(count, 1),
                                   "detail": detail})
        if row is None:  # resolved between the two statements: open it at the next look
            raise LookupError("the live issue went meanwhile")
        return Issue(*row), False

    def live(self, cur: Any = None) -> list[Issue]:
        """Every issue not yet resolved (open, acknowledged, or ignored while its condition
        lasts), of all tenants: what the watchers may resolve and remind of."""
        if cur is not None:
            return [Issue(*r) for r in self._live.all(cur)]
        with self.db.connection() as c:
            return [Issue(*r) for r in self._live.all(c)]

    def get(self, tenant_id: int, issue_id: int, cur: Any = None) -> Optional[Issue]:
        if cur is not None:
            row = self._get.one(cur, {"id": issue_id, "tenant_id": tenant_id})
        else:
            with self.db.connection() as c:
                row = self._get.one(c, {"id": issue_id, "tenant_id": tenant_id})
        return Issue(*row) if row else None

    def move(self, cur: Any, issue: Issue, state: str, now: Micros,
             by: Optional[str] = None) -> Optional[Issue]:
        """Compare-and-set of a live issue's state; None when it changed meanwhile. A move
        to `resolved` (or an ignored issue whose condition cleared: `ends`) sets resolved_at."""
        ends = state == "resolved"
        row = self._set.one(cur, {"tenant_id": issue.tenant_id, "id": issue.id,
                                  "old": issue.state, "state": state,
                                  "resolved_at": now if ends else None,
                                  "by": by if by is not None else issue.acknowledged_by})
        return Issue(*row) if row else None

    def end(self, cur: Any, issue: Issue, now: Micros) -> Optional[Issue]:
        """Its condition cleared: an open or acknowledged issue is resolved, an ignored one
        ends as ignored. None when another watcher (or a person) moved it first."""
        state = "ignored" if issue.state == "ignored" else "resolved"
        row = self._set.one(cur, {"tenant_id": issue.tenant_id, "id": issue.id,
                                  "old": issue.state, "state": state,
                                  "resolved_at": now, "by": issue.acknowledged_by})
        return Issue(*row) if row else None

    def page(self, tenant_id: int, state: Optional[str], kind: Optional[str],
             limit: int = PAGE) -> list[Issue]:
        stmt = select(issues).where(T.tenant_id == tenant_id)
        if state is not None:
            stmt = stmt.where(T.state == state)
        if kind is not None:
            stmt = stmt.where(T.kind == kind)
        stmt = stmt.order_by(T.opened_at.desc(), T.id.desc()).limit(limit)
        with self.db.connection() as cur:
            return [Issue(*r) for r in Sql(stmt, self._d, bound=True).all(cur)]

    def open_counts(self) -> dict[str, int]:
        """Live, unresolved issues by kind (for /metrics), of all tenants."""
        stmt = select(T.kind, func.count()).where(T.state == "open").group_by(T.kind)
        with self.db.connection() as cur:
            return dict(Sql(stmt, self._d).all(cur))

    def watched_sources(self) -> list[Watched]:
        with self.db.connection() as cur:
            return [Watched(*r) for r in self._sources.all(cur)]

    def watched_destinations(self) -> list[WatchedDestination]:
        with self.db.connection() as cur:
            return [WatchedDestination(*r) for r in self._destinations.all(cur)]

    def failed_deliveries(self) -> dict[tuple[int, str, str], int]:
        """Open delivery_failed reviews counted by (tenant, scope, destination)."""
        with self.db.connection() as cur:
            return {(t, s, n): c for t, s, n, c in self._failed.all(cur)}

    def open_reviews(self) -> dict[tuple[int, str, str], int]:
        """Open reviews counted by (tenant, scope, kind)."""
        with self.db.connection() as cur:
            return {(t, s, k): n for t, s, k, n in self._reviews.all(cur)}

    def unresolved_sends(self) -> dict[tuple[int, str], int]:
        """Sends waiting for a person (unresolved, with an open send_unknown review),
        counted by (tenant, connection name)."""
        with self.db.connection() as cur:
            return {(t, c): n for t, c, n in self._sends.all(cur)}

    def transaction(self):
        return self.db.transaction()
