"""Outbound sends in SQL (issue 28): a send written with its record's claim (in the caller's
transaction), the sender's take of due sends under a lease, its settle by compare-and-set on
that lease, each request's attempt row, and the reads of a record's sends.

The take serves only connections with room (fewer sends `sending` or `checking` under a live
lease than the connection's `max_in_flight`, counted across every sender while the
connections' rows are locked) and serves them in turn: each connection offers its oldest
due sends up to its room, and the sends chosen interleave connection by connection, so one
connection's backlog never keeps another's send waiting. Due are: a queued send whose
`next_attempt_at` has come, and a send `sending` or `checking` whose lease ran out (its
sender stopped mid-request: taken over, and the taker is told, since that request may have
reached the API). PostgreSQL locks the candidates FOR UPDATE SKIP LOCKED (as storage/take.py
does for events); SQLite's write lock serialises the takes.

Rates (a connection's `rate`) are held across processes by the take too: a connection's
sends taken in the last second (or minute) are counted from `send_attempts` and the sends
leased meanwhile, and a connection whose rate is spent offers nothing until it has room."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Optional

from sqlalchemy import bindparam, select, text, update
from sqlalchemy.dialects import postgresql, sqlite

from keystore_service.domain.records import SECOND, Micros, Record
from keystore_service.domain.sends import SendState
from keystore_service.storage.connections import Connection, _connection
from keystore_service.storage.db import Database
from keystore_service.storage.send_tables import connections, send_attempts, sends
from keystore_service.storage.sql import Sql
from keystore_service.storage.tables import records

S = sends.c
LEASE_MARGIN_SECONDS = 15  # a request's lease: the connection's timeout + this (as forwards)
ANSWER_KEPT = 512  # characters of an answer an attempt keeps (the design's bound)
_QUEUED, _SENDING, _CHECKING = (f"'{s.value}'" for s in (
    SendState.QUEUED, SendState.SENDING, SendState.CHECKING))
# Due: queued and its time come; a request whose lease ran out (its sender stopped); a
# check due again (an unclear one waits with its lease given up, until next_attempt_at).
_DUE = (f"((e.state = {_QUEUED} AND e.next_attempt_at <= :now) OR "
        f"(e.state = {_SENDING} AND e.lease_until <= :now) OR "
        f"(e.state = {_CHECKING} AND e.lease_until <= :now AND e.next_attempt_at <= :now))")
_CANDIDATES_PG = f"""
    SELECT f.id, c.id FROM connections c
    CROSS JOIN LATERAL (
        SELECT e.id, e.next_attempt_at FROM sends e
        WHERE e.connection_id = c.id AND {_DUE}
        ORDER BY e.next_attempt_at, e.id LIMIT :n
        FOR UPDATE OF e SKIP LOCKED) f
    WHERE c.id IN (SELECT DISTINCT e.connection_id FROM sends e WHERE {_DUE})
    ORDER BY c.id, f.next_attempt_at, f.id"""
_CANDIDATES_SQLITE = f"""
    SELECT e.id, e.connection_id FROM connections c
    JOIN sends e ON e.id IN (
        SELECT e.id FROM sends e WHERE e.connection_id = c.id AND {_DUE}
        ORDER BY e.next_attempt_at, e.id LIMIT :n)
    WHERE c.id IN (SELECT DISTINCT e.connection_id FROM sends e WHERE {_DUE})
    ORDER BY e.connection_id, e.next_attempt_at, e.id"""
# Per connection: its limits, and how many of its sends are in flight now and were made (or
# are being made) in the last second and minute (for its rate), then its row (the sender
# makes the send with the row as the take read it, so it does not read it again).
_ROOM = f"""
    SELECT c.id, c.max_in_flight, c.timeout_seconds, c.rate,
        (SELECT count(*) FROM sends d WHERE d.connection_id = c.id
           AND d.state IN ({_SENDING}, {_CHECKING}) AND d.lease_until > :now),
        (SELECT count(*) FROM send_attempts a JOIN sends d ON d.id = a.send_id
           WHERE d.connection_id = c.id AND a.at > :now - {SECOND}),
        (SELECT count(*) FROM send_attempts a JOIN sends d ON d.id = a.send_id
           WHERE d.connection_id = c.id AND a.at > :now - {60 * SECOND}),
        {", ".join(f"c.{column.name}" for column in connections.c)}
    FROM connections c WHERE c.id IN ({{ids}}) ORDER BY c.id"""
_LOCK = "SELECT id FROM connections WHERE id IN ({ids}) ORDER BY id FOR NO KEY UPDATE"


@dataclass(frozen=True, slots=True)
class Send:
    """One row of `sends` (field order is the table's column order)."""

    id: int
    tenant_id: int
    connection_id: Optional[int]
    connection_name: str
    record_id: int
    incarnation: int
    reference: str
    method: str
    path: str
    resource_id_pointer: Optional[str]
    sealed: Optional[str]
    state: str
    attempts: int
    unknown: int
    check_tries: int
    created_at: Micros
    window_end: Micros
    next_attempt_at: Micros
    lease_holder: Optional[str]
    lease_until: Optional[Micros]
    settled_at: Optional[Micros]
    last_error: Optional[str]


assert [c.name for c in sends.c] == list(Send.__slots__), "column order = Send"


@dataclass(frozen=True, slots=True)
class Taken:
    """A send leased by a take: `was` is its state before (sending or checking: taken over
    from a sender whose lease ran out), `timeout_seconds` its connection's, `connection` its
    connection's row as the take read it (under the take's lock: a PATCH committed before the
    take is in it); `record` the send's record as the take read it (in the take's
    transaction: the sender checks it as it would a record it read itself)."""

    send: Send
    was: str
    timeout_seconds: int
    connection: Optional[Connection] = None
    record: Optional[Record] = None


def _room_left(row: tuple) -> int:
    """How many sends a connection may start now: its free slots, and its rate's room."""
    _, max_in_flight, _, rate, in_flight, last_second, last_minute = row[:7]
    room = max_in_flight - in_flight
    limits = json.loads(rate) if rate else {}
    if limits.get("per_second"):
        room = min(room, int(limits["per_second"]) - last_second - in_flight)
    if limits.get("per_minute"):
        room = min(room, int(limits["per_minute"]) - last_minute - in_flight)
    return max(0, room)


def in_turn(candidates: list[tuple[int, int]], room: dict[int, int], limit: int) -> list[int]:
    """Send ids chosen from (send id, connection id) candidates in each connection's order:
    at most `room[connection]` of each, connection by connection in turn, `limit` in all."""
    queues: dict[int, list[int]] = {}
    for send_id, connection_id in candidates:
        queues.setdefault(connection_id, []).append(send_id)
    for connection_id, queue in queues.items():
        del queue[room.get(connection_id, 0):]
    chosen: list[int] = []
    depth = 0
    while len(chosen) < limit and any(len(q) > depth for q in queues.values()):
        for queue in queues.values():
            if len(queue) > depth and len(chosen) < limit:
                chosen.append(queue[depth])
        depth += 1
    return chosen


class SendStore:
    def __init__(self, db: Database):
        self.db = db
        self.sqlite = db.sqlite
        d = db.engine.dialect
        columns = [c.name for c in sends.c if c.name != "id"]
        ins = (sqlite if db.sqlite else postgresql).insert(sends).values(
            {n: bindparam(n) for n in columns})
        # A record's next attempt (released, then sent again) reuses its incarnation's row.
        self._put = Sql(ins.on_conflict_do_update(
            index_elements=[S.record_id, S.incarnation],
            set_={n: ins.excluded[n] for n in columns if n not in ("record_id", "incarnation")}
        ).returning(*sends.c), d)
        self._of_record = Sql(select(sends).where(
            S.tenant_id == bindparam("tenant_id"), S.record_id == bindparam("record_id"))
            .order_by(S.incarnation, S.id).limit(100), d)
        self._one = Sql(select(sends).where(S.record_id == bindparam("record_id"),
                                            S.incarnation == bindparam("incarnation")), d)
        self._by_id = Sql(select(sends).where(S.id == bindparam("id")), d)
        self._candidates = Sql(text(_CANDIDATES_SQLITE if db.sqlite else _CANDIDATES_PG), d)
        self._lease = Sql(update(sends).where(S.id == bindparam("sid")).values(
            state=bindparam("new_state"), lease_holder=bindparam("holder"),
            lease_until=bindparam("until")).returning(*sends.c), d)
        self._attempt = Sql(send_attempts.insert().values(
            {c.name: bindparam(c.name) for c in send_attempts.c if c.name != "id"}), d)
        A = send_attempts.c
        self._last = Sql(select(A.status_code, A.answer).where(A.send_id == bindparam("id"))
                         .order_by(A.at.desc(), A.id.desc()).limit(1), d)
        self._dialect = d
        self._cas: dict[tuple, Sql] = {}

    # --- the use case's writes (in its transaction) ----------------------------------------

    def put(self, cur: Any, values: dict) -> Send:
        """The send of a record's incarnation, new (or its row reset for the record's next
        attempt: a released record sent again)."""
        return Send(*self._put.one(cur, values))

    def of_incarnation(self, cur: Any, record_id: int, incarnation: int) -> Optional[Send]:
        row = self._one.one(cur, {"record_id": record_id, "incarnation": incarnation})
        return Send(*row) if row else None

    def by_record(self, tenant_id: int, record_id: int) -> list[Send]:
        """The record's sends, oldest incarnation first (at most 100)."""
        with self.db.connection() as cur:
            rows = self._of_record.all(cur, {"tenant_id": tenant_id, "record_id": record_id})
        return [Send(*row) for row in rows]

    def get(self, send_id: int, cur: Any = None) -> Optional[Send]:
        if cur is not None:
            row = self._by_id.one(cur, {"id": send_id})
        else:
            with self.db.connection() as c:
                row = self._by_id.one(c, {"id": send_id})
        return Send(*row) if row else None

    def transaction(self):
        return self.db.transaction()

    # --- the sender's take and settle ---------------------------------------------------

    def take_due(self, holder: str, now: Micros, limit: int) -> list[Taken]:
        """Up to `limit` due sends of connections with room, served in turn, each leased to
        `holder` for its connection's timeout + LEASE_MARGIN_SECONDS; a queued one is now
        `sending`, one taken over keeps its state (Taken.was says which)."""
        if limit <= 0:
            return []
        with self.db.transaction() as cur:
            candidates = [(r[0], r[1]) for r in self._candidates.all(
                cur, {"now": now, "n": limit})]
            if not candidates:
                return []
            ids = sorted({c for _, c in candidates})
            rooms = self._rooms(cur, ids, now)
            room = {row[0]: _room_left(row) for row in rooms}
            timeouts = {row[0]: row[2] for row in rooms}
            rows = {row[0]: _connection(tuple(row[7:])) for row in rooms}
            chosen = set(in_turn(candidates, room, limit))
            taken = []
            for send_id, connection_id in candidates:
                if send_id not in chosen:
                    continue
                before = self._by_id.one(cur, {"id": send_id})
                was = before[sends.c.keys().index("state")]
                until = now + (timeouts[connection_id] + LEASE_MARGIN_SECONDS) * SECOND
                new_state = SendState.SENDING.value if was == SendState.QUEUED.value else was
                row = self._lease.one(cur, {"sid": send_id, "new_state": new_state,
                                            "holder": holder, "until": until})
                taken.append(Taken(Send(*row), was, timeouts[connection_id],
                                   rows[connection_id]))
            if taken:  # their records in one statement, not one read per send
                found = self._records(cur, [t.send for t in taken])
                taken = [replace(t, record=found.get(t.send.record_id)) for t in taken]
        return taken

    def _records(self, cur: Any, of: list[Send]) -> dict[int, Record]:
        """The sends' records by id, each addressed by its tenant and id."""
        pairs = " OR ".join(f"(tenant_id = {int(s.tenant_id)} AND id = {int(s.record_id)})"
                            for s in of)  # integers from our own rows
        columns = ", ".join(column.name for column in records.c)
        rows = Sql(text(f"SELECT {columns} FROM records WHERE {pairs}"), self._dialect).all(cur)
        return {row[0]: Record(*row) for row in rows}

    def _rooms(self, cur: Any, ids: list[int], now: Micros) -> list[tuple]:
        """The connections' rows with their counts, locked on PostgreSQL (so every sender
        counts the others' committed takes)."""
        listed = ", ".join(str(int(i)) for i in ids)  # integers from our own query
        if not self.sqlite:  # a statement of its own: the counts then see others' commits
            Sql(text(_LOCK.format(ids=listed)), self._dialect).all(cur)
        return Sql(text(_ROOM.format(ids=listed)), self._dialect).all(cur, {"now": now})

    def settle(self, cur: Any, send: Send, changes: dict) -> Optional[Send]:
        """Apply `changes` if `send` still holds the lease it was taken with (holder and
        lease_until unchanged); None when it was taken over meanwhile."""
        names = tuple(sorted(changes))
        stmt = self._cas.get(names)
        if stmt is None:
            stmt = self._cas[names] = Sql(update(sends).where(
                S.id == bindparam("g_id"), S.lease_holder == bindparam("g_holder"),
                S.lease_until == bindparam("g_until")).values(
                {n: bindparam(n) for n in names}).returning(*sends.c), self._dialect)
        row = stmt.one(cur, {**changes, "g_id": send.id, "g_holder": send.lease_holder,
                             "g_until": send.lease_until})
        return Send(*row) if row else None

    def requeue(self, cur: Any, send: Send, now: Micros) -> Optional[Send]:
        """A leased send queued again at once (a check found its effect absent): the next
        request goes with the same key."""
        return self.settle(cur, send, {"state": SendState.QUEUED.value, "next_attempt_at": now,
                                       "lease_holder": None, "lease_until": None})

    def last_answer(self, cur: Any, send_id: int) -> tuple[Optional[int], bytes]:
        """The status and kept answer of the send's last attempt ((None, b"") for none)."""
        row = self._last.one(cur, {"id": send_id})
        if row is None:
            return None, b""
        return row[0], (row[1] or "").encode("utf-8")

    def add_attempt(self, cur: Any, send_id: int, at: Micros, duration_ms: int,
                    status_code: Optional[int], error: Optional[str], klass: str,
                    answer: Optional[str]) -> None:
        self._attempt.run(cur, {"send_id": send_id, "at": at, "duration_ms": duration_ms,
                                "status_code": status_code, "error": error, "class": klass,
                                "answer": None if answer is None else answer[:ANSWER_KEPT]})
