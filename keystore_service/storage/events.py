"""The gateway's accepted events in SQL: recording one with its record, taking due ones for
forwarding under a lease (SKIP LOCKED on PostgreSQL; SQLite's write lock serialises), writing
an attempt's result only while its lease holds, redelivery, listing, and dropping old bodies.
Every method runs on the caller's cursor and transaction unless it says otherwise."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Optional

from sqlalchemy import and_, bindparam, case, delete, func, null, or_, select, update

from keystore_service.domain.deliveries import DeliveryState as Q
from keystore_service.domain.records import SECOND, Micros, Record
from keystore_service.domain.routing import OrderingMode
from keystore_service.storage.bulk_sql import type_glob
from keystore_service.storage.db import Database
from keystore_service.storage.event_sql import (
    claim_and_add_sql,
    health_sql,
    leased,
    settles,
    unpark_sql,
)
from keystore_service.storage.sql import Sql
from keystore_service.storage.rate_slots import next_slot
from keystore_service.storage.take import DESTINATION, Take
from keystore_service.storage.route_tables import hook_destinations
from keystore_service.storage.tables import hook_attempts, hook_events, hook_sources

E, A, S, D = hook_events.c, hook_attempts.c, hook_sources.c, hook_destinations.c
ATTEMPTS_SHOWN = 20  # per delivery in a listing: the newest; the count says how many more
REDELIVERABLE = (Q.DELIVERED.value, Q.FAILED.value, Q.FILTERED.value,  # settled states
                 Q.SUPERSEDED.value)
UNSENT = (Q.FILTERED.value, Q.SUPERSEDED.value)  # settled without a forward
_OWN = ("id", "tenant_id", "source_id", "record_id", "event_id",  # what a reset keeps
        "destination_id")


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
    event_type: Optional[str] = None  # the provider's name for it (0013), None if it has none
    ordering_key: Optional[str] = None  # its key under an ordered destination (0018), or None
    ordering_mode: Optional[str] = None  # the OrderingMode it is held under (0019), or None
    destination_id: int = 0  # the source's destination it goes to (0021)


# An ordered destination's queued event waits on the earliest event of its key that holds it
# (storage/take.py): one being forwarded, or one accepted before it and queued (newer_wins:
# and due); its event id, or null.
_O = hook_events.alias("o")
_WAITING_ON = case((and_(E.state == Q.QUEUED.value, E.ordering_key.is_not(None)), select(
    _O.c.event_id).where(_O.c.tenant_id == E.tenant_id,
                         _O.c.destination_id == E.destination_id,
                         _O.c.ordering_key == E.ordering_key,
                         or_(_O.c.state == Q.DELIVERING.value,
                             and_(_O.c.state == Q.QUEUED.value, _O.c.id < E.id,
                                  or_(E.ordering_mode == OrderingMode.SERIAL.value,
                                      _O.c.next_attempt_at <= bindparam("now")))))
    .order_by(_O.c.id).limit(1).scalar_subquery())).label("waiting_on")
_DELIVERIES = select(func.count()).select_from(_O).where(  # of the row's record
    _O.c.tenant_id == E.tenant_id, _O.c.record_id == E.record_id).scalar_subquery()
_WAITING_ON_ONE = select(_WAITING_ON).where(E.tenant_id == bindparam("tid"),
                                             E.id == bindparam("id"))
# a record's deliveries by state, read after its row is locked (Forwarding._settle_record)
_STATES_OF = select(E.state, func.count()).where(
    E.tenant_id == bindparam("tid"), E.record_id == bindparam("rid")).group_by(E.state)


@dataclass(frozen=True, slots=True)
class Health:
    """What an attempt says of its source's destination (HookStore.source_changes): it
    fails (`probe_at`: the next probe), or it answered after failing (`since`: a run of
    failures begun at this time or earlier was an outage, whose waiting events are due)."""

    tenant_id: int
    probe_at: Optional[Micros] = None
    since: Optional[Micros] = None


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
        self._claim_and_add = None if db.sqlite else Sql(claim_and_add_sql(), d)
        self._add_quietly = Sql(hook_events.insert().values(  # executemany: no RETURNING
            {n: bindparam(n) for n in cols}), d).text
        self._unpark = {p: Sql(unpark_sql(p), d) for p in (False, True)}
        self._waiting_on = Sql(_WAITING_ON_ONE, d)
        self._of_record = Sql(select(hook_events).where(E.record_id == bindparam("rid"))
                              .order_by(E.destination_id), d)
        self._states_of = Sql(_STATES_OF, d)
        self._by_id = Sql(select(hook_events).where(E.id == bindparam("id")), d)
        self._reset = Sql(update(hook_events).where(E.id == bindparam("eid")).values(  # all
            {c.name: bindparam(c.name) for c in hook_events.c if c.name not in _OWN}
        ).returning(*hook_events.c), d)
        self._forget = Sql(delete(hook_attempts).where(A.event_pk == bindparam("eid")), d)
        # The take (storage/take.py): fair across tenants and sources, in two round trips.
        self._take = Take(d, db.sqlite)
        self._attempt = Sql(hook_attempts.insert().values(
            {c.name: bindparam(c.name) for c in hook_attempts.c if c.name != "id"}), d)
        # An attempt's result is written only while it still holds the lease it took; a
        # filtered or superseded event's take made no forward: its count is given back.
        self._settle = Sql(update(hook_events).where(*leased()).values(
            state=bindparam("state"), next_attempt_at=bindparam("next_at"),
            delivered_at=bindparam("delivered_at"), lease_holder=null(), lease_until=null(),
            attempts=E.attempts - bindparam("given_back")).returning(E.id), d)
        if not db.sqlite:
            self._settled, self._settled_ended, self._settled_fanout = settles(d)
        did, tid = bindparam("did"), bindparam("tid")
        self._error = Sql(update(hook_destinations).where(D.id == did, D.tenant_id == tid).values(
            last_error=bindparam("error"), last_error_at=bindparam("now")), d)
        # A success clears the source's last error, and touches its row only if it has one:
        # every forward's settle wrote this one row before, so concurrent settles queued on
        # its lock, each for its commit's flush (measured: bench/NOTES.md, "The gateway").
        self._error_cleared = Sql(update(hook_destinations).where(
            D.id == did, D.tenant_id == tid, D.last_error.is_not(None)).values(
            last_error=null(), last_error_at=null()), d)
        self._failing, self._recover, self._recovered = health_sql(d)
        self._pause = Sql(update(hook_destinations).where(D.id == did, D.tenant_id == tid).values(
            paused_until=func.max(func.coalesce(D.paused_until, 0), bindparam("until"))
            if db.sqlite else func.greatest(func.coalesce(D.paused_until, 0),
                                            bindparam("until"))), d)
        self._redeliver = Sql(update(hook_events).where(
            E.id == bindparam("eid"), or_(*(E.state == s for s in REDELIVERABLE))).values(
            state=Q.QUEUED.value, window_start=bindparam("now"), next_attempt_at=bindparam("now"),
            delivered_at=null()).returning(*hook_events.c), d)
        keep = select(S.keep_body_seconds).where(S.id == E.source_id).scalar_subquery()
        self._drop = Sql(update(hook_events).where(  # one not sent: from its acceptance
            E.body.is_not(None), or_(
                and_(E.state == Q.DELIVERED.value,
                     E.delivered_at <= bindparam("now") - keep * SECOND),
                and_(or_(*(E.state == s for s in UNSENT)),
                     E.received_at <= bindparam("now") - keep * SECOND)))
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

    def of_record(self, cur: Any, record_id: int) -> list[Event]:
        """The record's deliveries, one per destination, in the destinations' order."""
        return [Event(*row) for row in self._of_record.all(cur, {"rid": record_id})]

    def states_of(self, cur: Any, tenant_id: int, record_id: int) -> dict[str, int]:
        """How many of the record's deliveries are in each state."""
        return dict(self._states_of.all(cur, {"tid": tenant_id, "rid": record_id}))

    def by_id(self, cur: Any, event_pk: int) -> Optional[Event]:
        row = self._by_id.one(cur, {"id": event_pk})
        return Event(*row) if row else None

    def reset(self, cur: Any, event: Event, **values: Any) -> Event:
        """The event row of a record that starts a new incarnation, as a new event."""
        self._forget.run(cur, {"eid": event.id})
        return Event(*self._reset.one(cur, {"eid": event.id, **values}))

    # --- forwarding -----------------------------------------------------------------------

    def take_due(self, holder: str, now: Micros, limit: int, ended: bool = False,
                 idle: bool = False
                 ) -> tuple[list[Event], dict[int, tuple], bool, Optional[Micros]]:
        """Take up to `limit` due events (queued and due, or delivering with an expired
        lease: taken over as the next attempt) of sources with room (not paused, fewer
        than `max_in_flight` in flight across every relay: the sources' rows are locked
        while their events are counted), served in turn: tenants first, then their sources
        (storage/take.py). With `ended`, also the queued events of paused sources whose
        retry window has ended (to be failed without a forward). Each under a lease of its
        source's timeout + take.LEASE_MARGIN_SECONDS. In a transaction of its own; the
        events taken, their sources' rows by id, and whether due events were left (by
        `limit`, by their sources' max_in_flight or rate), and when the first source whose
        rate held some back has room again (None: no rate held any; take.next_slot)."""
        with self.db.steps() as steps:
            sources, leased, found = self._take.run(steps, holder, now, limit, ended, idle)
        return ([Event(*row) for row in leased], {row[DESTINATION]: row for row in sources},
                len(leased) < len(found), next_slot(sources, found, leased, now))

    def settle(self, cur: Any, event: Event, holder: str, state: str, now: Micros,
               next_at: Optional[Micros]) -> bool:
        """Write an attempt's end (queued again, delivered, failed, or filtered or
        superseded: no forward was made, and `attempts` no longer counts the take's) if the
        attempt still holds its lease; False when it was taken over meanwhile (its result is
        dropped)."""
        return self._settle.one(cur, {
            "eid": event.id, "holder": holder, "attempt": event.attempts, "state": state,
            "next_at": next_at, "delivered_at": now if state == Q.DELIVERED else None,
            "given_back": int(state in UNSENT)}) is not None

    def settled(self, event: Event, holder: str, state: str, now: Micros,
                next_at: Optional[Micros], duration_ms: int, status: Optional[int],
                error: Optional[str], answer: str, record_state: Optional[str] = None,
                result: Optional[str] = None, fanout: bool = False
                ) -> Optional[tuple[Any, dict]]:
        """PostgreSQL: settle, record_attempt (none for a filtered event: no forward was
        made) and (with `record_state`) the end of the event's record as one statement, to
        send with others (Database.steps); its one row says whether the attempt still held
        its lease. None on SQLite (no data-modifying WITH there): settle, record_attempt and
        the record's compare-and-set one by one."""
        if self.sqlite:
            return None
        filtered = state in UNSENT
        params = {"eid": event.id, "holder": holder, "attempt": event.attempts,
                  "state": state, "next_at": next_at,
                  "delivered_at": now if state == Q.DELIVERED else None, "now": now,
                  "duration_ms": duration_ms, "status_code": status, "error": error,
                  "answer": answer, "sent": not filtered, "given_back": int(filtered)}
        if record_state is None:
            return self._settled, params
        return (self._settled_fanout if fanout else self._settled_ended), {
            **params, "ending": record_state, "result": result, "tid": event.tenant_id}

    def unpark(self, steps: Any, settled: list[Event], now: Micros,
               retried: tuple[Event, ...] = ()) -> None:
        """In the settle's transaction (Database.steps), after `settled` left the queue for
        good: the next event of each one's key goes (storage/take.py parked it): serial's
        earliest queued one if it is parked; newer_wins' earliest parked one (an earlier
        one waiting for its retry holds none), also after the newer_wins events of `retried`
        went back to wait. Keys in order, so two relays' row locks cannot cross."""
        newer = OrderingMode.NEWER_WINS.value
        keys = sorted({(e.tenant_id, e.destination_id, e.ordering_key,
                        e.ordering_mode == newer) for e in settled if e.ordering_key} | {
            (e.tenant_id, e.destination_id, e.ordering_key, True) for e in retried
            if e.ordering_key and e.ordering_mode == newer})
        if keys:
            steps.send([(self._unpark[parked], {"tid": tid, "did": did, "key": key,
                                                "now": now})
                        for tid, did, key, parked in keys])

    def record_attempt(self, cur: Any, event: Event, now: Micros, duration_ms: int,
                       status: Optional[int], error: Optional[str], answer: str) -> None:
        self._attempt.run(cur, {"event_pk": event.id, "number": event.attempts, "at": now,
                                "duration_ms": duration_ms, "status_code": status,
                                "error": error, "answer": answer})

    def source_changes(self, destination_id: int, tenant_id: int, error: Optional[str],
                       now: Micros, pause_until: Optional[Micros],
                       health: Optional[Health] = None) -> list[tuple[Sql, dict]]:
        """The destination's last error after an attempt (None: cleared, and its row touched
        only if it has one), its failing run and probe or its recovery (`health`), and its
        pause (a 429/503 with Retry-After), as statements to send (Database.steps)."""
        ids = {"did": destination_id, "tid": tenant_id}
        out = [(self._error_cleared, ids) if error is None else
               (self._error, {**ids, "error": error, "now": now})]
        if health is not None:
            params = {**ids, "now": now, "error": error, "probe_at": health.probe_at,
                      "since": health.since}
            if health.probe_at is not None:  # the destination fails
                out = [(self._failing, params)]
            else:  # recovered: the events first, then the source's row (the take's order)
                out = [(self._recover, params), (self._recovered, params), *out]
        if pause_until is not None:
            out.append((self._pause, {**ids, "until": pause_until}))
        return out

    def redeliver(self, cur: Any, event: Event, now: Micros) -> Optional[Event]:
        row = self._redeliver.one(cur, {"eid": event.id, "now": now})
        return Event(*row) if row else None

    def drop_old_bodies(self, cur: Any, now: Micros) -> int:
        """Delivered events keep their body keep_body_seconds after delivery, filtered and
        superseded ones after their acceptance (none would otherwise ever drop it); then only
        its fingerprint."""
        return self._drop.run(cur, {"now": now}).rowcount

    def page(self, tenant_id: int, source: Optional[str], state: Optional[str],
             event_id: Optional[str], limit: int, after: Optional[tuple[int, int]],
             event_type: Optional[str] = None, *, now: Micros, destination: Optional[str] = None
             ) -> tuple[list[tuple[str, Event, Optional[str], str, int]],
                        dict[int, list[Attempt]]]:
        """Up to `limit` of a tenant's deliveries, newest first (after `after`: the
        (received_at, id) of the last one shown), each with its source's name, the event id
        it waits on at `now` (an ordered destination's: waiting_on), its destination's name
        and how many deliveries its event has, without its body (`body` is b"" while kept,
        None once dropped) or its headers (`headers` is "[]": a listing shows neither, and
        500 events sent with 100 headers of 8 KB each would be 400 MB read; issue 25, item
        8), and their newest attempts."""
        cols = [c for c in hook_events.c if c.name not in ("body", "headers")]
        stmt = (select(S.name, *cols, _DELIVERIES, D.name, _WAITING_ON, E.body.is_not(None))
                .join(hook_sources, S.id == E.source_id)
                .join(hook_destinations, D.id == E.destination_id)
                .where(E.tenant_id == tenant_id)
                .order_by(E.received_at.desc(), E.id.desc()).limit(limit))
        if source:
            stmt = stmt.where(S.name == source)
        if state:
            stmt = stmt.where(E.state == state)
        if destination:
            stmt = stmt.where(D.name == destination)
        if event_id:
            stmt = stmt.where(E.event_id == event_id)
        if event_type:  # a glob (domain/bulk.py)
            stmt = stmt.where(type_glob(E.event_type, event_type, self.sqlite))
        if after:
            at, last = after
            stmt = stmt.where((E.received_at < at) | ((E.received_at == at) & (E.id < last)))
        names = [c.name for c in cols]
        with self.db.connection() as cur:
            rows = Sql(stmt.params(now=now), self.db.engine.dialect, bound=True).all(cur)
            attempts = self.attempts_of(cur, [row[1] for row in rows])
        return [(row[0], Event(body=b"" if row[-1] else None, headers="[]",
                               **dict(zip(names, row[1:-4], strict=True))), row[-2], row[-3],
                 row[-4]) for row in rows], attempts

    def waiting_on(self, cur: Any, event: Event, now: Micros) -> Optional[str]:
        """The event id of the earliest unsettled event of `event`'s key that it waits on
        at `now` (queued under an ordered destination); None when it waits on none."""
        if event.state != Q.QUEUED.value or event.ordering_key is None:
            return None
        row = self._waiting_on.one(cur, {"tid": event.tenant_id, "id": event.id,
                                         "now": now})
        return row[0] if row else None

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
        relays of every instance LISTEN for it (gateway/relay.py)."""
        with self.db.connection() as cur:
            cur.execute("NOTIFY keystore_hooks")

    def transaction(self):
        return self.db.transaction()

    def steps(self):
        return self.db.steps()


assert [c.name for c in hook_events.c] == [f.name for f in fields(Event)], "column order"
assert [c.name for c in hook_attempts.c] == [f.name for f in fields(Attempt)], "column order"
