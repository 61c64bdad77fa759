"""Alert channels and the notices' outbox in SQL. A notice is made at most once per
(channel, issue, event, seq) (the unique constraint: a second watcher's insert does
nothing), taken for sending by a compare-and-set lease (an expired lease is taken over),
and its result written only while that lease holds."""
from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, Optional

from sqlalchemy import bindparam, delete, func, null, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.domain.issues import NoticeState
from keystore_service.domain.records import Micros
from keystore_service.storage.alert_tables import alert_channels, alert_notices
from keystore_service.storage.db import Database
from keystore_service.storage.sql import Sql

C, N = alert_channels.c, alert_notices.c
# A channel, a notice, a channel's notices: always with their tenant (single-shard on Citus,
# docs/scaling.md).
ONE = (C.tenant_id == bindparam("tenant_id")) & (C.id == bindparam("cid"))
NOTICE = (N.tenant_id == bindparam("tenant_id")) & (N.id == bindparam("id"))
OF_CHANNEL = (N.tenant_id == bindparam("tenant_id")) & (N.channel_id == bindparam("cid"))
CHANGEABLE = ("sealed", "shown", "to_address", "kinds", "remind_after_seconds", "daily_report")


@dataclass(frozen=True, slots=True)
class Channel:
    id: int
    tenant_id: int
    name: str
    kind: str
    sealed: str
    shown: Optional[str]
    to_address: Optional[str]
    kinds: Optional[str]  # JSON list; None: every kind
    remind_after_seconds: int
    daily_report: int
    report_day: Optional[str]
    held_since: Optional[Micros]
    created_at: Micros
    updated_at: Micros

    def wants(self, kind: str) -> bool:
        return self.kinds is None or kind in json.loads(self.kinds)

    @property
    def kind_list(self) -> Optional[list[str]]:
        return None if self.kinds is None else json.loads(self.kinds)


@dataclass(frozen=True, slots=True)
class Notice:
    id: int
    tenant_id: int
    channel_id: int
    issue_id: Optional[int]
    event: str
    seq: int
    state: str
    body: str
    attempts: int
    created_at: Micros
    next_attempt_at: Micros
    lease_holder: Optional[str]
    lease_until: Optional[Micros]
    sent_at: Optional[Micros]
    last_error: Optional[str]


class AlertStore:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        names = [f.name for f in fields(Channel) if f.name != "id"]
        self._add = Sql(alert_channels.insert().values({n: bindparam(n) for n in names})
                        .returning(*alert_channels.c), d)
        self._named = Sql(select(alert_channels).where(
            C.tenant_id == bindparam("tenant_id"), C.name == bindparam("name")), d)
        self._of_tenant = Sql(select(alert_channels).where(
            C.tenant_id == bindparam("tenant_id")).order_by(C.name), d)
        self._all = Sql(select(alert_channels).order_by(C.id), d)
        self._by_id = Sql(select(alert_channels).where(ONE), d)
        self._change = {n: Sql(update(alert_channels).where(ONE).values(
            {n: bindparam(n), "updated_at": bindparam("now")}), d) for n in CHANGEABLE}
        self._delete = Sql(delete(alert_channels).where(ONE), d)
        self._report_day = Sql(update(alert_channels).where(
            ONE, or_(C.report_day.is_(None), C.report_day < bindparam("day"))).values(
            report_day=bindparam("day")), d)
        self._hold = Sql(update(alert_channels).where(
            ONE, C.held_since.is_(None)).values(
            held_since=bindparam("now")), d)
        self._unhold = Sql(update(alert_channels).where(ONE).values(
            held_since=null()), d)
        cols = [f.name for f in fields(Notice) if f.name != "id"]
        ins = (sqlite if db.sqlite else postgresql).insert(alert_notices).values(
            {n: bindparam(n) for n in cols})
        self._notice = Sql(ins.on_conflict_do_nothing(
            index_elements=[N.channel_id, N.issue_id, N.event, N.seq])
            .returning(N.id), d)
        self._due = Sql(select(alert_notices).where(or_(
            (N.state == NoticeState.QUEUED.value) & (N.next_attempt_at <= bindparam("now")),
            (N.state == NoticeState.SENDING.value) & (N.lease_until <= bindparam("now"))))
            .order_by(N.next_attempt_at).limit(bindparam("n")), d)
        self._lease = Sql(update(alert_notices).where(
            NOTICE, N.state == bindparam("old"),
            N.attempts == bindparam("attempts")).values(
            state=NoticeState.SENDING.value, lease_holder=bindparam("holder"),
            lease_until=bindparam("until"),
            attempts=N.attempts + 1), d)
        self._result = Sql(update(alert_notices).where(
            NOTICE, N.state == NoticeState.SENDING.value,
            N.lease_holder == bindparam("holder")).values(
            state=bindparam("state"), next_attempt_at=bindparam("next"),
            sent_at=bindparam("sent_at"), last_error=bindparam("error"), lease_holder=null(),
            lease_until=null()), d)
        self._sent_since = Sql(select(func.count(), func.min(N.sent_at)).where(
            OF_CHANNEL, N.sent_at >= bindparam("since")), d)
        self._held = Sql(select(alert_notices).where(
            OF_CHANNEL, N.state == NoticeState.HELD.value).order_by(N.id), d)
        self._fold = Sql(update(alert_notices).where(
            OF_CHANNEL, N.state == NoticeState.HELD.value,
            N.id <= bindparam("upto")).values(state=NoticeState.FOLDED.value), d)
        self._counts = Sql(select(N.state, func.count()).where(
            or_(N.state == NoticeState.SENT.value, N.state == NoticeState.FAILED.value)
        ).group_by(N.state), d)
        self._d = d

    # --- channels -----------------------------------------------------------------------

    def create(self, cur: Any, **values: Any) -> Channel:
        """A new channel; the caller's IntegrityError when the tenant has the name already."""
        return Channel(*self._add.one(cur, values))

    def named(self, tenant_id: int, name: str, cur: Any = None) -> Optional[Channel]:
        row = self._one(self._named, {"tenant_id": tenant_id, "name": name}, cur)
        return Channel(*row) if row else None

    def by_id(self, tenant_id: int, channel_id: int, cur: Any = None) -> Optional[Channel]:
        row = self._one(self._by_id, {"tenant_id": tenant_id, "cid": channel_id}, cur)
        return Channel(*row) if row else None

    def of_tenant(self, tenant_id: int, cur: Any = None) -> list[Channel]:
        if cur is not None:
            return [Channel(*r) for r in self._of_tenant.all(cur, {"tenant_id": tenant_id})]
        with self.db.connection() as c:
            return [Channel(*r) for r in self._of_tenant.all(c, {"tenant_id": tenant_id})]

    def all(self) -> list[Channel]:
        with self.db.connection() as cur:
            return [Channel(*r) for r in self._all.all(cur)]

    def change(self, cur: Any, channel: Channel, changes: dict, now: Micros) -> None:
        for name, value in changes.items():
            self._change[name].run(cur, {**_of(channel), name: value, "now": now})

    def delete(self, cur: Any, channel: Channel) -> None:
        self._delete.run(cur, _of(channel))

    def claim_report_day(self, cur: Any, channel: Channel, day: str) -> bool:
        """True for the one process that may send `day`'s report to the channel."""
        return self._report_day.run(cur, {**_of(channel), "day": day}).rowcount == 1

    # --- notices ------------------------------------------------------------------------

    def add_notice(self, cur: Any, channel: Channel, issue_id: Optional[int], event: str,
                   seq: int, body: dict, now: Micros, at: Optional[Micros] = None) -> bool:
        """One notice to send from `at` (default now); False when it was made already."""
        row = self._notice.one(cur, {
            "tenant_id": channel.tenant_id, "channel_id": channel.id, "issue_id": issue_id,
            "event": event, "seq": seq, "state": NoticeState.QUEUED.value, "body": json.dumps(body),
            "attempts": 0, "created_at": now, "next_attempt_at": now if at is None else at,
            "lease_holder": None, "lease_until": None, "sent_at": None, "last_error": None})
        return row is not None

    def take(self, holder: str, now: Micros, lease_until: Micros, n: int) -> list[Notice]:
        """Up to `n` due notices, leased to `holder` (each by its own compare-and-set)."""
        taken = []
        with self.db.connection() as cur:
            for row in self._due.all(cur, {"now": now, "n": n}):
                notice = Notice(*row)
                if self._lease.run(cur, {"tenant_id": notice.tenant_id,
                                         "id": notice.id, "old": notice.state,
                                         "attempts": notice.attempts, "holder": holder,
                                         "until": lease_until}).rowcount == 1:
                    taken.append(notice)
        return taken

    def settle(self, cur: Any, notice: Notice, holder: str, state: str, now: Micros,
               next_at: Optional[Micros] = None, error: Optional[str] = None) -> bool:
        """The leased notice's result; False when its lease was taken over meanwhile."""
        return self._result.run(cur, {
            "tenant_id": notice.tenant_id, "id": notice.id, "holder": holder,
            "state": state,
            "next": next_at if next_at is not None else notice.next_attempt_at,
            "sent_at": now if state == NoticeState.SENT.value else None,
            "error": error}).rowcount == 1

    def sent_since(self, cur: Any, channel: Channel, since: Micros) -> tuple[int, Optional[int]]:
        """How many of the channel's notices went since `since`, and the first one's time."""
        n, first = self._sent_since.one(cur, {**_of(channel), "since": since})
        return n, first

    def hold(self, cur: Any, channel: Channel, now: Micros) -> bool:
        """Mark the channel as holding notices back; True for the first to do so."""
        return self._hold.run(cur, {**_of(channel), "now": now}).rowcount == 1

    def held(self, cur: Any, channel: Channel) -> list[Notice]:
        return [Notice(*r) for r in self._held.all(cur, _of(channel))]

    def fold(self, cur: Any, channel: Channel, upto: int) -> None:
        """The held notices up to id `upto` were told by one "N more" notice."""
        self._fold.run(cur, {**_of(channel), "upto": upto})
        self._unhold.run(cur, _of(channel))

    def notice_counts(self) -> dict[str, int]:
        with self.db.connection() as cur:
            return dict(self._counts.all(cur))

    def of_issue(self, issue_id: int) -> list[Notice]:
        stmt = select(alert_notices).where(N.issue_id == issue_id).order_by(N.id)
        with self.db.connection() as cur:
            return [Notice(*r) for r in Sql(stmt, self._d, bound=True).all(cur)]

    def transaction(self):
        return self.db.transaction()

    def _one(self, stmt: Sql, params: dict, cur: Any = None) -> Optional[tuple]:
        if cur is not None:
            return stmt.one(cur, params)
        with self.db.connection() as c:
            return stmt.one(c, params)


def _of(channel: Channel) -> dict:
    """What addresses a channel: its tenant and its id."""
    return {"tenant_id": channel.tenant_id, "cid": channel.id}
