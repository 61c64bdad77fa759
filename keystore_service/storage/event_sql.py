"""The larger statements of HookStore (storage/events.py): on PostgreSQL the settle of an
attempt with its record in one round trip, and an ingest's claim with its event's row; on
both, a destination's failing run and its recovery."""
from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, bindparam, func, insert, null, or_, select, update
from sqlalchemy.dialects import postgresql

from keystore_service.domain.deliveries import DeliveryState as Q
from keystore_service.storage.records import INSERT_COLUMNS, insert_or_count
from keystore_service.storage.route_tables import hook_destinations
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import attempts, hook_attempts, hook_events, records

E, A, D = hook_events.c, hook_attempts.c, hook_destinations.c


def leased() -> tuple:
    """An event still held by the attempt that took it (its id, holder and attempt)."""
    return (E.id == bindparam("eid"), E.state == Q.DELIVERING.value,
            E.lease_holder == bindparam("holder"), E.attempts == bindparam("attempt"))


def settled_sql(ended: bool, fanout: bool = False) -> Any:
    """WITH ev AS (the settle, RETURNING the event), at AS (INSERT its attempt FROM ev, when
    :sent: a filtered event's has none) [, rec AS (UPDATE its record, still in progress, to
    `ending` with `result`), h AS (INSERT the record's attempt history FROM rec)] SELECT
    ev's id, and whether rec ended. With `fanout`, rec only when no other delivery of the
    record is queued or being forwarded: sent after a statement that locked the record's
    row (RecordStore.lock_sql), so that its snapshot sees every other delivery's end."""
    ev = update(hook_events).where(*leased()).values(
        state=bindparam("state"), next_attempt_at=bindparam("next_at"),
        delivered_at=bindparam("delivered_at"), lease_holder=null(), lease_until=null(),
        attempts=E.attempts - bindparam("given_back")).returning(E.id, E.record_id).cte("ev")
    names = [c.name for c in hook_attempts.c if c.name != "id"]
    at = insert(hook_attempts).from_select(names, select(
        ev.c.id, *(bindparam(p, type_=hook_attempts.c[n].type) for p, n in (
            ("attempt", "number"), ("now", "at"), ("duration_ms", "duration_ms"),
            ("status_code", "status_code"), ("error", "error"), ("answer", "answer"))))
        .where(bindparam("sent", type_=Boolean))).returning(A.id).cte("at")
    parts = [ev.c.id, select(func.count()).select_from(at).scalar_subquery()]
    if ended:  # as RecordStore.compare_and_set with its history, for a record in progress
        R = records.c
        o = hook_events.alias("o")
        others = ~select(o.c.id).where(
            o.c.tenant_id == bindparam("tid"), o.c.record_id == R.id,
            o.c.id != bindparam("eid"),
            or_(o.c.state == Q.QUEUED.value, o.c.state == Q.DELIVERING.value)).exists()
        rec = update(records).where(
            R.id == select(ev.c.record_id).scalar_subquery(), R.state == "in_progress",
            *((others,) if fanout else ())).values(state=bindparam("ending"), lease_expires_at=null(),
                 result_resource_id=null(), result=bindparam("result")
                 ).returning(R.id, R.incarnation, R.attempt,
                             func.coalesce(R.lease_acquired_at, R.first_seen_at)).cte("rec")
        h = insert(attempts).from_select(
            ["record_id", "incarnation", "attempt", "acquired_at", "ended_at", "ending",
             "reason"],
            select(*rec.c, bindparam("now", type_=attempts.c.ended_at.type),
                   bindparam("ending", type_=attempts.c.ending.type), null())
        ).returning(attempts.c.id).cte("h")
        parts += [select(func.count()).select_from(rec).scalar_subquery(),
                  select(func.count()).select_from(h).scalar_subquery()]
    return select(*parts)


def settles(dialect: Any) -> tuple[Sql, Sql, Sql]:
    """The settle without its record's end, with it, and with a fanned-out record's end."""
    return tuple(Sql(settled_sql(*kind), dialect)
                 for kind in ((False, False), (True, False), (True, True)))


def claim_and_add_sql() -> Any:
    """WITH r AS (the claim) , e AS (INSERT the event SELECT ... FROM r WHERE r's lease
    token is the one this claim brought, i.e. it inserted r) SELECT r.*, e's count."""
    ins = postgresql.insert(records).values({n: bindparam(n) for n in INSERT_COLUMNS})
    r = insert_or_count(ins, []).cte("r")
    cols = [c for c in hook_events.c if c.name not in ("id", "tenant_id", "record_id",
                                                         "event_id")]
    added = insert(hook_events).from_select(
        ["tenant_id", "record_id", "event_id", *(c.name for c in cols)],
        select(r.c.tenant_id, r.c.id, r.c.key,
               *(bindparam(f"ev_{c.name}", type_=c.type) for c in cols))
        .where(r.c.lease_token_hash == bindparam("lease_token_hash"))
    ).returning(E.id).cte("e")
    return select(*r.c, select(func.count()).select_from(added).scalar_subquery())


def health_sql(d: Any) -> tuple[Sql, Sql, Sql]:
    """Recovery (issue 27): a failed forward that says the destination is down marks the
    destination failing (since its first such failure) and sets its next probe; the success
    that ends a failing run at least `since` long makes its waiting events due at once."""
    did, tid = bindparam("did"), bindparam("tid")
    first = (D.id == did, D.tenant_id == tid)
    failing = Sql(update(hook_destinations).where(*first).values(
        last_error=bindparam("error"), last_error_at=bindparam("now"),
        failing_since=func.coalesce(D.failing_since, bindparam("now")),
        probe_at=bindparam("probe_at")), d)
    recover = Sql(update(hook_events).where(
        E.tenant_id == tid, E.destination_id == did, E.state == Q.QUEUED.value,
        E.next_attempt_at > bindparam("now"),
        select(D.id).where(*first, D.failing_since <= bindparam("since")).exists())
        .values(next_attempt_at=bindparam("now")), d)
    recovered = Sql(update(hook_destinations).where(*first, D.failing_since.is_not(None))
                    .values(last_error=null(), last_error_at=null(), failing_since=null(),
                            probe_at=null()), d)
    return failing, recover, recovered


# The next event of a key, once the one before it settled: the earliest queued one, if it is
# parked (take.py), is due now; under newer_wins (where one waiting for its retry holds
# nothing), the earliest parked one.
_K = hook_events.alias("k")


def unpark_sql(parked_only: bool) -> Any:
    first = [_K.c.tenant_id == bindparam("tid"), _K.c.destination_id == bindparam("did"),
             _K.c.ordering_key == bindparam("key"), _K.c.state == Q.QUEUED.value]
    if parked_only:
        first.append(_K.c.next_attempt_at.is_(None))
    return update(hook_events).where(
        E.tenant_id == bindparam("tid"), E.next_attempt_at.is_(None), E.state == Q.QUEUED.value,
        E.id == select(func.min(_K.c.id)).where(*first).scalar_subquery()).values(
        next_attempt_at=bindparam("now"))
