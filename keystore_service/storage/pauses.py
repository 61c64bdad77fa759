"""The statements of an operator's controls over a source (issue 27): its pause and resume,
"retry now", and its queue as the operators' list shows it. SourceStore runs them.

An operator's pause is kept apart from a destination's (Retry-After, `paused_until`): it
began at `operator_paused_at`, ends by itself at `operator_paused_until` (null: when resumed)
and never fails an event, because when it ends the time it lasted is added to the retry
window of each event of the source that was waiting meanwhile (its `window_start` moves on).
The shift is written in the transaction that clears the pause, once: that transaction's
conditional write on `operator_paused_at` is lost by any other that ended the same pause
first, and it is then rolled back (PauseChanged)."""
from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, bindparam, case, func, null, or_, select, update

from keystore_service.domain.deliveries import DeliveryState as Q
from keystore_service.storage.route_tables import hook_destinations
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import hook_events, hook_sources

S, E, D = hook_sources.c, hook_events.c, hook_destinations.c


class PauseChanged(Exception):
    """The operator's pause read before was ended (or replaced) by another writer meanwhile:
    roll back and read the source again."""


def _micros(name: str) -> Any:
    return bindparam(name, type_=BigInteger)


class PauseSql:
    def __init__(self, dialect: Any):
        d = dialect
        sid, tid, now = bindparam("sid"), bindparam("tid"), _micros("now")
        waiting = or_(E.state == Q.QUEUED.value, E.state == Q.DELIVERING.value)
        start, end = _micros("started"), _micros("end")
        # an operator's pause is on one destination (hook_destinations, 0020; several since
        # 0023): a pause of the whole source is one on each, and each ends on its own
        did = bindparam("did")
        one = (D.id == did, D.tenant_id == tid)
        self.start = Sql(update(hook_destinations).where(*one).values(
            operator_paused_at=func.coalesce(D.operator_paused_at, now),
            operator_paused_until=bindparam("until"), pause_reason=bindparam("reason")), d)
        self.touched = Sql(update(hook_sources).where(S.id == sid, S.tenant_id == tid).values(
            updated_at=now), d)
        # The shift first (the events' rows, then the source's: the take's order of locks).
        # An event accepted during the pause starts its window when the pause ends.
        self.shift = Sql(update(hook_events).where(
            E.tenant_id == tid, E.destination_id == did, waiting, E.window_start < end).values(
            window_start=case((E.window_start >= start, end),
                              else_=E.window_start + (end - start))), d)
        self.end = Sql(update(hook_destinations).where(
            *one, D.operator_paused_at == start).values(
            operator_paused_at=null(), operator_paused_until=null(), pause_reason=null())
            .returning(D.source_id), d)
        # Every tenant's pauses that ended by themselves (the relay's sweep clears them).
        self.expired = Sql(select(D.source_id, D.tenant_id, D.id).where(
            D.operator_paused_until <= now), d)
        # by the source's destinations: the (destination, state, next attempt) index (0021)
        queued = [E.tenant_id == tid, E.destination_id.in_(select(D.id).where(
            D.source_id == sid, D.tenant_id == tid)), E.state == Q.QUEUED.value]
        # one event: a row when it is queued (due now, or already), none otherwise
        self.retry_one = Sql(update(hook_events).where(
            E.tenant_id == tid, E.id == bindparam("eid"), E.state == Q.QUEUED.value).values(
            next_attempt_at=case((E.next_attempt_at > now, now), else_=E.next_attempt_at))
            .returning(E.id), d)
        self.retry_all = Sql(update(hook_events).where(*queued, E.next_attempt_at > now)
                             .values(next_attempt_at=now), d)
        self.due = Sql(select(func.count()).select_from(hook_events).where(
            *queued, E.next_attempt_at <= now), d)
        self.queues = Sql(_queues(), d)


def _queues() -> Any:
    """Per source of the tenant: queued, delivering, failed, the oldest queued's received_at
    and the earliest next attempt of the queued (a parked one has none), each from the
    events' indexes (a count over one, a first row of one: (source, state, received_at), and
    per destination (destination, state, next_attempt_at)), not from a read of the events."""
    def count(state: Q) -> Any:
        return select(func.count()).select_from(hook_events).where(
            E.source_id == S.id, E.state == state.value).scalar_subquery()

    oldest = select(E.received_at).where(E.source_id == S.id, E.state == Q.QUEUED.value) \
        .order_by(E.received_at).limit(1).scalar_subquery()
    each = select(E.next_attempt_at).where(
        E.destination_id == D.id, E.state == Q.QUEUED.value, E.next_attempt_at.is_not(None)
    ).order_by(E.next_attempt_at).limit(1).correlate(hook_destinations).scalar_subquery()
    due = select(func.min(each)).where(D.source_id == S.id, D.tenant_id == S.tenant_id) \
        .correlate(hook_sources).scalar_subquery()
    return select(S.id, count(Q.QUEUED), count(Q.DELIVERING), count(Q.FAILED), oldest,
                  due).where(S.tenant_id == bindparam("tenant_id"))
