"""The gateway's accepted events in SQL: recording one with its record, taking due ones for
forwarding under a lease (SKIP LOCKED on PostgreSQL; SQLite's write lock serialises), writing
an attempt's result only while its lease holds, redelivery, listing, and dropping old bodies.
Every method runs on the caller's cursor and transaction unless it says otherwise."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Optional

from sqlalchemy import bindparam, delete, func, insert, null, or_, select, update
from sqlalchemy.dialects import postgresql

from keystore_service.domain.records import SECOND, Micros, Record
from keystore_service.storage.db import Database
from keystore_service.storage.records import INSERT_COLUMNS, insert_or_count
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import hook_attempts, hook_events, hook_sources, records

E, A, S = hook_events.c, hook_attempts.c, hook_sources.c
ATTEMPTS_SHOWN = 20  # per delivery in a listing: the newest; the count says how many more
LEASE_MARGIN_SECONDS = 15  # an attempt's lease: the destination's timeout + this (contract)


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    tenant_id: int
    source_id: int
    record_id: int
    event_id: str
    state: str
    body: Optional[bytes]
    headers: str
    received_at: Micros
    window_start: Micros
    next_attempt_at: Optional[Micros]
    attempts: int
    lease_holder: Optional[str]
    lease_until: Optional[Micros]
    delivered_at: Optional[Micros]
    body_dropped_at: Optional[Micros]


@dataclass(frozen=True, slots=True)
class Attempt:
    id: int
    event_pk: int
    number: int
    at: Micros
    duration_ms: int
    status_code: Optional[int]
    error: Optional[str]
    answer: Optional[str]


class HookStore:
    def __init__(self, db: Database):
        self.db = db
        self.sqlite = db.sqlite
        d = db.engine.dialect
        cols = [f.name for f in fields(Event) if f.name != "id"]
        self._add = Sql(hook_events.insert().values({n: bindparam(n) for n in cols})
                        .returning(*hook_events.c), d)
        self._claim_and_add = None if db.sqlite else Sql(_claim_and_add(), d)
        self._add_quietly = Sql(hook_events.insert().values(  # executemany: no RETURNING
            {n: bindparam(n) for n in cols}), d).text
        self._of_record = Sql(select(hook_events).where(E.record_id == bindparam("rid")), d)
        self._by_id = Sql(select(hook_events).where(E.id == bindparam("id")), d)
        self._reset = Sql(update(hook_events).where(E.id == bindparam("eid")).values(
            {n: bindparam(n) for n in ("state", "body", "headers", "received_at",
                                       "window_start", "next_attempt_at", "attempts",
                                       "lease_holder", "lease_until", "delivered_at",
                                       "body_dropped_at")}).returning(*hook_events.c), d)
        self._forget = Sql(delete(hook_attempts).where(A.event_pk == bindparam("eid")), d)
        # Two statements, not one with an OR: PostgreSQL answers an OR of the two with a
        # bitmap scan, which reads every index entry of every event that was ever queued or
        # delivering and is not vacuumed yet (an event's state changes twice as it is
        # forwarded); a plain index scan in (state, next_attempt_at) order stops at its LIMIT
        # and marks the dead entries it meets, so the next take skips them (measured: 13.7 ms
        # a take after 49,000 forwards, 0.2 ms; docs/benchmarks.md, "The gateway").
        not_paused = or_(S.paused_until.is_(None), S.paused_until <= bindparam("now"))
        joined = select(E.id, E.source_id).join(hook_sources, S.id == E.source_id)
        queued = joined.where(E.state == "queued", E.next_attempt_at <= bindparam("now"),
                              not_paused).order_by(E.next_attempt_at, E.id)
        expired = joined.where(E.state == "delivering", E.lease_until <= bindparam("now"),
                               not_paused).order_by(E.lease_until, E.id)
        self._candidates = []
        for stmt in (expired, queued):  # leases that ran out first: overdue attempts
            stmt = stmt.limit(bindparam("n"))
            if not db.sqlite:
                stmt = stmt.with_for_update(of=hook_events, skip_locked=True)
            self._candidates.append(Sql(stmt, d))
        limits = select(S.max_in_flight, S.timeout_seconds).where(S.id == bindparam("sid"))
        self._limits = Sql(limits if db.sqlite else limits.with_for_update(), d)
        self._flying = Sql(select(func.count()).where(
            E.source_id == bindparam("sid"), E.state == "delivering",
            E.lease_until > bindparam("now")), d)
        self._take = Sql(update(hook_events).where(E.id == bindparam("eid")).values(
            state="delivering", attempts=E.attempts + 1, lease_holder=bindparam("holder"),
            lease_until=bindparam("until")).returning(*hook_events.c), d)
        self._attempt = Sql(hook_attempts.insert().values(
            {c.name: bindparam(c.name) for c in hook_attempts.c if c.name != "id"}), d)
        # An attempt's result is written only while it still holds the lease it took.
        self._settle = Sql(update(hook_events).where(
            E.id == bindparam("eid"), E.state == "delivering",
            E.lease_holder == bindparam("holder"), E.attempts == bindparam("attempt"))
            .values(state=bindparam("state"), next_attempt_at=bindparam("next_at"),
                    delivered_at=bindparam("delivered_at"), lease_holder=null(),
                    lease_until=null()).returning(E.id), d)
        self._error = Sql(update(hook_sources).where(S.id == bindparam("sid")).values(
            last_error=bindparam("error"), last_error_at=bindparam("now")), d)
        # A success clears the source's last error, and touches its row only if it has one:
        # every forward's settle wrote this one row before, so concurrent settles queued on
        # its lock, each for its commit's flush (measured: docs/benchmarks.md, "The gateway").
        self._error_cleared = Sql(update(hook_sources).where(
            S.id == bindparam("sid"), S.last_error.is_not(None)).values(
            last_error=null(), last_error_at=null()), d)
        self._pause = Sql(update(hook_sources).where(S.id == bindparam("sid")).values(
            paused_until=func.max(func.coalesce(S.paused_until, 0), bindparam("until"))
            if db.sqlite else func.greatest(func.coalesce(S.paused_until, 0),
                                            bindparam("until"))), d)
        self._redeliver = Sql(update(hook_events).where(
            E.id == bindparam("eid"), or_(E.state == "delivered", E.state == "failed")).values(
            state="queued", window_start=bindparam("now"), next_attempt_at=bindparam("now"),
            delivered_at=null()).returning(*hook_events.c), d)
        keep = select(S.keep_body_seconds).where(S.id == E.source_id).scalar_subquery()
        self._drop = Sql(update(hook_events).where(
            E.state == "delivered", E.body.is_not(None),
            E.delivered_at <= bindparam("now") - keep * SECOND)
            .values(body=null(), body_dropped_at=bindparam("now")), d)

    # --- recording ------------------------------------------------------------------------

    def add(self, cur: Any, **values: Any) -> Event:
        return Event(*self._add.one(cur, values))

    def claim_and_add(self, values: dict, event: dict) -> tuple[Optional[Record], bool]:
        """PostgreSQL: the claim of an event's record (RecordStore.claim) and, when the
        claim inserted it, the event's row, in one statement on an autocommit connection
        (one round trip and one commit: an ingest was BEGIN, two INSERTs and COMMIT).
        The claimed row (None when the domain must decide) and whether the event was added.
        """
        assert self._claim_and_add is not None
        params = {**values, **{f"ev_{k}": v for k, v in event.items()}}
        with self.db.connection() as cur:
            row = self._claim_and_add.one(cur, params)
        if row is None:
            return None, False
        return Record(*row[:-1]), bool(row[-1])

    def add_many(self, cur: Any, rows: list[dict]) -> None:
        """Several new events, each a dict of every column but id, in one executemany."""
        if rows:
            cur.executemany(self._add_quietly, rows)

    def of_record(self, cur: Any, record_id: int) -> Optional[Event]:
        row = self._of_record.one(cur, {"rid": record_id})
        return Event(*row) if row else None

    def by_id(self, cur: Any, event_pk: int) -> Optional[Event]:
        row = self._by_id.one(cur, {"id": event_pk})
        return Event(*row) if row else None

    def reset(self, cur: Any, event: Event, **values: Any) -> Event:
        """The event row of a record that starts a new incarnation, as a new event."""
        self._forget.run(cur, {"eid": event.id})
        return Event(*self._reset.one(cur, {"eid": event.id, **values}))

    # --- forwarding -----------------------------------------------------------------------

    def take_due(self, cur: Any, holder: str, now: Micros, limit: int) -> list[Event]:
        """Take up to `limit` due events (queued and due, or delivering with an expired
        lease: taken over as the next attempt) of sources that are not paused, each under a
        lease of its source's timeout + LEASE_MARGIN, at most `max_in_flight` per source
        across every relay: the sources' rows are locked while their events are counted."""
        candidates = [row for stmt in self._candidates
                      for row in stmt.all(cur, {"now": now, "n": limit * 4})]
        if not candidates:
            return []
        limits, room = {}, {}
        for sid in sorted({sid for _, sid in candidates}):  # locked in order: no deadlock
            row = self._limits.one(cur, {"sid": sid})
            if row is None:
                continue  # removed meanwhile: nothing of it is taken
            limits[sid] = row
            flying = self._flying.one(cur, {"sid": sid, "now": now})[0]
            room[sid] = limits[sid][0] - flying
        taken: list[Event] = []
        for event_pk, sid in candidates:
            if len(taken) >= limit or room.get(sid, 0) <= 0:
                continue
            room[sid] -= 1
            until = now + (limits[sid][1] + LEASE_MARGIN_SECONDS) * SECOND
            taken.append(Event(*self._take.one(cur, {"eid": event_pk, "holder": holder,
                                                     "until": until})))
        return taken

    def settle(self, cur: Any, event: Event, holder: str, state: str, now: Micros,
               next_at: Optional[Micros]) -> bool:
        """Write an attempt's end (queued again, delivered or failed) if the attempt still
        holds its lease; False when it was taken over meanwhile (its result is dropped)."""
        return self._settle.one(cur, {
            "eid": event.id, "holder": holder, "attempt": event.attempts, "state": state,
            "next_at": next_at, "delivered_at": now if state == "delivered" else None}) \
            is not None

    def record_attempt(self, cur: Any, event: Event, now: Micros, duration_ms: int,
                       status: Optional[int], error: Optional[str], answer: str) -> None:
        self._attempt.run(cur, {"event_pk": event.id, "number": event.attempts, "at": now,
                                "duration_ms": duration_ms, "status_code": status,
                                "error": error, "answer": answer})

    def source_error(self, cur: Any, source_id: int, error: Optional[str], now: Micros) -> None:
        if error is None:
            self._error_cleared.run(cur, {"sid": source_id})
        else:
            self._error.run(cur, {"sid": source_id, "error": error, "now": now})

    def pause(self, cur: Any, source_id: int, until: Micros) -> None:
        self._pause.run(cur, {"sid": source_id, "until": until})

    def redeliver(self, cur: Any, event: Event, now: Micros) -> Optional[Event]:
        row = self._redeliver.one(cur, {"eid": event.id, "now": now})
        return Event(*row) if row else None

    def drop_old_bodies(self, cur: Any, now: Micros) -> int:
        """Delivered events keep their body keep_body_seconds; then only its fingerprint."""
        return self._drop.run(cur, {"now": now}).rowcount

    def page(self, tenant_id: int, source: Optional[str], state: Optional[str],
             event_id: Optional[str], limit: int, after: Optional[tuple[int, int]]
             ) -> tuple[list[tuple[str, Event]], dict[int, list[Attempt]]]:
        """Up to `limit` of a tenant's events, newest first (after `after`: the
        (received_at, id) of the last one shown), each with its source's name and without
        its body (`body` is b"" while kept, None once dropped), and their newest attempts."""
        cols = [c for c in hook_events.c if c.name != "body"]
        stmt = (select(S.name, *cols, E.body.is_not(None)).join(hook_sources,
                                                                 S.id == E.source_id)
                .where(E.tenant_id == tenant_id)
                .order_by(E.received_at.desc(), E.id.desc()).limit(limit))
        if source:
            stmt = stmt.where(S.name == source)
        if state:
            stmt = stmt.where(E.state == state)
        if event_id:
            stmt = stmt.where(E.event_id == event_id)
        if after:
            at, last = after
            stmt = stmt.where((E.received_at < at) | ((E.received_at == at) & (E.id < last)))
        names = [c.name for c in cols]
        with self.db.connection() as cur:
            rows = Sql(stmt, self.db.engine.dialect, bound=True).all(cur)
            attempts = self.attempts_of(cur, [row[1] for row in rows])
        return [(row[0], Event(body=b"" if row[-1] else None,
                               **dict(zip(names, row[1:-1], strict=True)))) for row in rows], \
            attempts

    def attempts_of(self, cur: Any, event_pks: list[int]) -> dict[int, list[Attempt]]:
        """The newest ATTEMPTS_SHOWN attempts of each event, oldest first."""
        if not event_pks:
            return {}
        stmt = select(hook_attempts).where(A.event_pk.in_(event_pks)).order_by(
            A.event_pk, A.number.desc(), A.id.desc())
        out: dict[int, list[Attempt]] = {}
        for row in Sql(stmt, self.db.engine.dialect, bound=True).all(cur):
            shown = out.setdefault(row[1], [])
            if len(shown) < ATTEMPTS_SHOWN:
                shown.append(Attempt(*row))
        return {pk: list(reversed(v)) for pk, v in out.items()}

    def notify_relays(self) -> None:
        """NOTIFY keystore_hooks (PostgreSQL), on an autocommit connection of its own: the
        relays of every instance LISTEN for it (hooks/relay.py)."""
        with self.db.connection() as cur:
            cur.execute("NOTIFY keystore_hooks")

    def transaction(self):
        return self.db.transaction()


def _claim_and_add() -> Any:
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


assert [c.name for c in hook_events.c] == [f.name for f in fields(Event)], "column order"
assert [c.name for c in hook_attempts.c] == [f.name for f in fields(Attempt)], "column order"
