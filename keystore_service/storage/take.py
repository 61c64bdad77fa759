"""The take of due events, fair across tenants, sources and destinations (issue 25): the
statements of HookStore.take_due.

A take serves only sources with room (not paused, fewer events in flight than their
`max_in_flight`, counted across every relay under the sources' row locks) and serves them
in turn: each source offers its oldest due events up to its free slots. So one source's
backlog, however old, never keeps another source's event waiting behind it.

Since migration 0021 each event goes to one destination of its source (its
`destination_id`), and everything said here of a source is said of each destination: the
room, the pauses, the rate, the probe and the order per key are the destination's row's.
The candidates' and the locked rows' "source id" is the destination's id; a locked row is
the source seen through that destination (storage/sources.Source, its destination_id).
The turns have three levels: the events chosen interleave by tenant, then within a tenant
by source, then within a source by destination, each level starting with the one a take
served longest ago (`hook_destinations.last_taken_at`, written by the take; a source's and
a tenant's: the latest of those of their destinations that offer events), ties by id. So a
source with ten flooded destinations gets one turn for another source's one of the same
tenant, not ten.

Two round trips on PostgreSQL, as before (bench/NOTES.md, "The gateway"): the
candidates (per source, an index scan of its own due events that stops at its room, rows
locked SKIP LOCKED), then the sources' rows locked, the choice and the lease with the
COMMIT. SQLite runs the same steps one by one under its write lock.

Candidates are of four kinds, in this order within a source: 0 an attempt whose lease ran
out (overdue: taken over as the next attempt), 1 a queued event that is due, 2 a queued
event of a source *paused by its destination* whose retry window has ended (only when the
caller sweeps for them, about once a second: it is then failed without a forward,
gateway/forwarding.py; an operator's pause never fails an event: storage/pauses.py), 3 a
probe (issue 27): the oldest queued event of a source whose destination fails and that was
not tried for PROBE_SECONDS, whatever its backoff (also only in the sweep).

A source is paused while its destination's pause (`paused_until`) or an operator's
(`operator_paused_at`, until `operator_paused_until` if set) is on.

A source with a rate (issue 29, `rate_interval_us` = T, the microseconds between two forwards
at the rate) has room for at most as many forwards as fit a GCRA whose theoretical arrival
time is `rate_tat`: k fit when max(tat, now) + k*T <= now + burst*T, burst being one second's
worth at the rate (round(1 s / T), at least 1: 5 at 5/s, 1 at 1/s or 30/min, 10 at 600/min).
The lease takes the lesser of that and the max_in_flight room, and advances rate_tat by T for
each event it leases that is forwarded (all but ENDED: failed without a request), in the
same statement (PostgreSQL) or the touch step (SQLite), under the sources' row locks: so
every relay's takes together hold the rate.

An event of a serial destination (issue 29, `ordering_key` set at its acceptance) is due, or
a probe, only while no other event of its key at its source is being forwarded and no
earlier one (a smaller id: accepted before it) is queued: one waiting for its retry holds
the later ones of its key, never another key's, and one that failed for good holds none.
Under newer_wins (`ordering_mode`, migration 0019) only an earlier one that is due holds it,
besides one being forwarded: one at a time, so each compares with the one before it, but
one waiting for its retry holds nothing (it is superseded at its turn if a newer one went).
The others are read as committed (READ COMMITTED, or SQLite's one writer), so another
relay's take, which locks one without changing its state until it commits, still holds the
rest. A held event would be read again by every take while it waits (a key's backlog of
thousands against everyone's takes), so the sweep's take parks it out of the due range
(`next_attempt_at` null, PARK), and the settle of the event before it lets the next one of
its key go (HookStore.unpark); the sweep also lets go a parked event that nothing holds any
more (UNPARK: a settle that raced its parking), looking at UNPARK_BATCH of them each time, the
next ones by id at each sweep and then from the first again, so a leftover behind thousands
that wait for good reason is reached within a few sweeps.
Measured with 5,000 events of one key held (PostgreSQL, this machine): a take read them in
40 ms before they were parked, 4.4 ms after; a sweep with them parked, 16 ms."""
from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Dialect

from keystore_service.domain.deliveries import DeliveryState
from keystore_service.domain.records import SECOND
from keystore_service.domain.routing import OrderingMode
from keystore_service.storage.sql import Sql
from keystore_service.storage.sources import OF_DESTINATION, Source
from keystore_service.storage.tables import hook_events

LEASE_MARGIN_SECONDS = 15  # an attempt's lease: the destination's timeout + this (contract)
EXPIRED, DUE, ENDED, PROBE = 0, 1, 2, 3  # the kinds of candidates
# The contract's probe: a failing destination is tried at least this often (a module
# constant that tests shorten; read at each take).
PROBE_SECONDS = 30
# The two states the take reads and writes, as SQL literals of their stored strings.
_QUEUED, _DELIVERING = (f"'{s.value}'" for s in (DeliveryState.QUEUED, DeliveryState.DELIVERING))

_IN_FLIGHT = f"""(SELECT count(*) FROM hook_events d WHERE d.destination_id = s.id
                   AND d.state = {_DELIVERING} AND d.lease_until > :now)"""
_HELD_OFF = "(s.paused_until IS NOT NULL AND s.paused_until > :now)"  # by the destination
_PAUSED = (f"({_HELD_OFF} OR (s.operator_paused_at IS NOT NULL AND "
           "(s.operator_paused_until IS NULL OR s.operator_paused_until > :now)))")
# The rate's burst (module docstring), and the forwards the rate has room for (no rate: :n).
_BURST = f"(CASE WHEN s.rate_interval_us >= {SECOND} THEN 1 ELSE " \
         f"({SECOND} + s.rate_interval_us / 2) / s.rate_interval_us END)"
_DEBT = "(CASE WHEN s.rate_tat > :now THEN s.rate_tat - :now ELSE 0 END)"
_RATE_ROOM = (f"(CASE WHEN s.rate_interval_us IS NULL THEN :n ELSE {_BURST} - "
              f"({_DEBT} + s.rate_interval_us - 1) / s.rate_interval_us END)")
# A serial destination's event whose key has no earlier event still to be forwarded (the
# partial index ix_hook_events_serial finds that one).
def _first_of_key(e: str) -> str:
    """Queued event `e` is free to go: it has no key, or no other event of its key is being
    forwarded and none accepted before it is queued (newer_wins: and due). Two looks, each a
    range of ix_hook_events_serial (source, key, state[, below id]) that never reads the
    key's settled history (one look with an OR read all of the key's events, history too)."""
    same = (f"SELECT 1 FROM hook_events k WHERE k.destination_id = {e}.destination_id AND "
            f"k.ordering_key = {e}.ordering_key AND k.state = ")
    return (f"({e}.ordering_key IS NULL OR (NOT EXISTS ({same}{_DELIVERING}) AND "
            f"NOT EXISTS ({same}{_QUEUED} AND k.id < {e}.id AND ({e}.ordering_mode = "
            f"'{OrderingMode.SERIAL.value}' OR k.next_attempt_at <= :now))))")


_FIRST_OF_KEY = _first_of_key("e")
PARK_BATCH = 10_000  # held events parked by one sweep (each is parked once)
UNPARK_BATCH = 1_000  # the parked events one sweep looks at (a race's leftovers), in turn
# The sweep's two statements (module docstring): park the due keyed events that are held;
# let go the oldest parked ones that nothing holds. On PostgreSQL rows another transaction
# holds are skipped (two relays' sweeps, or a settle, never wait on each other in a cycle).


def _park(skip: str) -> str:
    return (f"UPDATE hook_events SET next_attempt_at = NULL WHERE id IN (SELECT e.id FROM "
            f"hook_events e WHERE e.ordering_key IS NOT NULL AND e.state = {_QUEUED} AND "
            f"e.next_attempt_at <= :now AND NOT {_FIRST_OF_KEY} ORDER BY e.next_attempt_at, "
            f"e.id LIMIT {PARK_BATCH}{skip})")


def _parked(batch: int) -> str:
    """The window of parked events a sweep looks at: `batch` of them after :after."""
    return (f"FROM hook_events p WHERE p.ordering_key IS NOT NULL AND p.state = {_QUEUED} "
            f"AND p.next_attempt_at IS NULL AND p.id > :after ORDER BY p.id LIMIT {batch}")


def _window(batch: int) -> str:
    """How many parked events the window holds, and the last one's id."""
    return f"SELECT count(*), max(w.id) FROM (SELECT p.id {_parked(batch)}) w"


def _unpark(skip: str, batch: int) -> str:
    return (f"UPDATE hook_events SET next_attempt_at = :now WHERE id IN (SELECT e.id FROM "
            f"(SELECT p.id, p.destination_id, p.ordering_key, p.ordering_mode {_parked(batch)}"
            f"{skip}) e WHERE {_FIRST_OF_KEY})")
# Per kind: the condition on an event of source s, its order, and the condition on s.
_KINDS = {
    EXPIRED: (f"e.state = {_DELIVERING} AND e.lease_until <= :now", "e.lease_until",
              f"NOT {_PAUSED}"),
    DUE: (f"e.state = {_QUEUED} AND e.next_attempt_at <= :now AND {_FIRST_OF_KEY}",
          "e.next_attempt_at", f"NOT {_PAUSED}"),
    ENDED: (f"e.state = {_QUEUED} AND e.next_attempt_at <= :now AND "
            f"e.window_start <= :now - (SELECT so.retry_window_seconds FROM hook_sources so "
            f"WHERE so.id = s.source_id) * {SECOND}", "e.next_attempt_at",
            f"{_HELD_OFF} AND s.operator_paused_at IS NULL"),
    PROBE: (f"e.state = {_QUEUED} AND e.next_attempt_at > :now AND {_FIRST_OF_KEY}",
            "e.received_at",
            f"NOT {_PAUSED} AND s.failing_since IS NOT NULL AND s.probe_at <= :now"),
}
# How many candidates of a kind a source offers: its room, all of :n (ENDED: no forward),
# or one (PROBE).
_LIMITS = {ENDED: (":n", ":n"), PROBE: ("0", "1")}


# The relay's spare slots (gateway/relay.py) take only the due events of sources that have
# nothing in flight (across every relay), one per destination: an idle source's event starts
# at once however many slots other sources' slow destinations hold.
_IDLE = (f" AND NOT EXISTS (SELECT 1 FROM hook_events b WHERE b.source_id = s.source_id AND "
         f"b.state = {_DELIVERING} AND b.lease_until > :now)")


def _candidates_pg(kind: int, idle: bool = False) -> str:
    """Each source's oldest events of `kind`, at most its room + 1 of them (the one more
    tells that some were left behind), locked; rows (event id, source id, kind, order).
    With `idle`, at most one of each destination of a source with nothing in flight."""
    where, order, of_source = _KINDS[kind]
    # a source its rate holds offers none, so it locks none that another relay would skip
    # (and then forward a later event of it first)
    limit = _LIMITS[kind][0] if kind in _LIMITS else \
        f"LEAST(:n, GREATEST(0, s.max_in_flight - {_IN_FLIGHT}), GREATEST(0, {_RATE_ROOM}))"
    return f"""
        SELECT f.id, s.id, {kind}, f.ord FROM hook_destinations s
        CROSS JOIN LATERAL (
            SELECT e.id, {order} AS ord FROM hook_events e
            WHERE e.destination_id = s.id AND {where}
            ORDER BY {order}, e.id LIMIT {"LEAST(1, " + limit + ")" if idle else limit + " + 1"}
            FOR UPDATE OF e SKIP LOCKED) f
        WHERE {of_source}{_IDLE if idle else ""}"""


def _candidates_sqlite(kind: int, idle: bool = False) -> str:
    """As _candidates_pg without LATERAL (SQLite has none, and its LIMIT cannot name an
    outer column): up to :n of each source; the lease then keeps each source's room."""
    where, order, of_source = _KINDS[kind]
    return f"""
        SELECT e.id, e.destination_id, {kind}, {order} FROM hook_destinations s
        JOIN hook_events e ON e.id IN (
            SELECT e.id FROM hook_events e WHERE e.destination_id = s.id AND {where}
            ORDER BY {order}, e.id LIMIT {1 if idle else _LIMITS.get(kind, (0, ":n"))[1]})
        WHERE {of_source}{_IDLE if idle else ""}"""


# A source's row as storage/sources.py reads it, seen through the destination taken (0021).
_COMPUTED = {"fanout": "(SELECT count(*) FROM hook_destinations f WHERE f.source_id = s.id)"}
_SOURCE_COLUMNS = ", ".join(f"d.{OF_DESTINATION[f.name]}" if f.name in OF_DESTINATION
                            else _COMPUTED[f.name] if f.name in _COMPUTED
                            else f"s.{f.name}" for f in fields(Source))
_WITH_DESTINATION = ("hook_sources s JOIN hook_destinations d ON d.source_id = s.id AND "
                     "d.tenant_id = s.tenant_id")
# where the destination's id is in an event's row and in a source's
_EVENT_DESTINATION = [c.name for c in hook_events.c].index("destination_id")
DESTINATION = [f.name for f in fields(Source)].index("destination_id")
_EVENT_COLUMNS = ", ".join(c.name for c in hook_events.c)
# The choice, after the sources' rows are locked (a statement of its own before it, so the
# count in flight sees every other relay's committed take): per destination its first
# `room` candidates (expired leases first, then the oldest due); a paused one only those
# whose window ended; then turn by turn (module docstring): each tenant's next source's next
# destination's next event (`rounds`: the destinations' turns within their source, `turns`:
# the sources' within their tenant); at most :n in all.
# A due event of a source with a rate waits while an older due event of its source is left
# out of this take's candidates (another relay holds it locked, PostgreSQL's SKIP LOCKED):
# the other relay forwards that one first, so a rate's backlog goes in acceptance order.
# Not for sources without a rate, whose events several relays forward side by side; nor for
# an older one that its serial key holds (it is no candidate of any take).
_OLDER = (f"SELECT 1 FROM hook_events o WHERE o.destination_id = c.sid AND o.state = {_QUEUED} "
          "AND o.next_attempt_at <= :now AND (o.next_attempt_at < c.ord OR "
          "(o.next_attempt_at = c.ord AND o.id < c.id)) AND o.id NOT IN (SELECT id FROM c) "
          f"AND {_first_of_key('o')}")
_LEASE = f"""
    WITH c AS ({{candidates}}),
    src AS (
        SELECT s.id AS sid, s.source_id AS so, s.tenant_id AS tid,
               COALESCE(s.last_taken_at, 0) AS last,
               {_PAUSED} AS paused, s.max_in_flight - {_IN_FLIGHT} AS slots,
               {_RATE_ROOM} AS paced, s.rate_interval_us IS NOT NULL AS rated
        FROM hook_destinations s WHERE s.id IN (SELECT sid FROM c)),
    fit AS (
        SELECT c.id, c.sid, c.kind, src.so, src.tid, src.last,
               CASE WHEN src.paused OR src.paced >= src.slots THEN src.slots
                    ELSE src.paced END AS room,
               row_number() OVER (PARTITION BY c.sid ORDER BY c.kind, c.ord, c.id) AS rn
        FROM c JOIN src ON src.sid = c.sid WHERE (c.kind = {ENDED} OR NOT src.paused)
            AND (NOT src.rated OR c.kind <> {DUE} OR NOT EXISTS ({_OLDER}))),
    rounds AS (
        SELECT id, sid, kind, so, tid,
               row_number() OVER (PARTITION BY so ORDER BY rn, last, sid) AS dturn,
               max(last) OVER (PARTITION BY so) AS slast,
               max(last) OVER (PARTITION BY tid) AS tlast
        FROM fit WHERE rn <= room),
    turns AS (
        SELECT id, sid, kind, tid, tlast,
               row_number() OVER (PARTITION BY tid ORDER BY dturn, slast, so) AS turn
        FROM rounds),
    chosen AS (SELECT id, sid, kind FROM turns ORDER BY turn, tlast, tid LIMIT :n){{touch}}
    UPDATE hook_events SET state = {_DELIVERING}, attempts = attempts + 1,
        lease_holder = :holder,
        lease_until = :now + ((SELECT timeout_seconds FROM hook_destinations s
                               WHERE s.id = hook_events.destination_id)
                              + {LEASE_MARGIN_SECONDS}) * {SECOND}
    WHERE id {{chosen}}
    RETURNING {{returning}}"""
# A source served: its turn, (if it is failing) its next probe, since it is tried now, and
# (with a rate) its GCRA's arrival time, T later for each of its events forwarded.
_TOUCH = ("UPDATE hook_destinations SET last_taken_at = :now, probe_at = CASE WHEN probe_at <= "
          ":now THEN :probe_at ELSE probe_at END, rate_tat = CASE WHEN rate_interval_us IS "
          "NULL THEN NULL ELSE (CASE WHEN rate_tat > :now THEN rate_tat ELSE :now END) + "
          "rate_interval_us * {forwards} END WHERE id {sids}")
_PG = {
    "sources": f"SELECT {_SOURCE_COLUMNS} FROM {_WITH_DESTINATION} "
               "WHERE d.id = ANY(CAST(:sids AS integer[])) ORDER BY d.id FOR NO KEY UPDATE OF d",
    # The candidates come as JSON [[event id, source id, kind, order], ...].
    "lease": _LEASE.format(
        candidates="SELECT CAST(x->>0 AS bigint) AS id, CAST(x->>1 AS integer) AS sid, "
                   "CAST(x->>2 AS integer) AS kind, CAST(x->>3 AS bigint) AS ord "
                   "FROM jsonb_array_elements(CAST(:c AS jsonb)) AS u(x)",
        # the sources served, in the same statement: no round trip more
        touch=",\n    touched AS (" + _TOUCH.format(
            sids="IN (SELECT sid FROM chosen)",
            forwards=f"(SELECT count(*) FROM chosen WHERE chosen.sid = "
                     f"hook_destinations.id "
                     f"AND chosen.kind <> {ENDED})") + ")",
        chosen="= ANY(ARRAY(SELECT id FROM chosen))",  # the primary key, whatever the stats
        returning=_EVENT_COLUMNS),
}
_SQLITE = {
    "sources": f"SELECT {_SOURCE_COLUMNS} FROM {_WITH_DESTINATION} "
               "WHERE d.id IN (SELECT value FROM json_each(:sids)) ORDER BY d.id",
    "lease": _LEASE.format(
        candidates="SELECT json_extract(value, '$[0]') AS id, "
                   "json_extract(value, '$[1]') AS sid, json_extract(value, '$[2]') AS kind, "
                   "json_extract(value, '$[3]') AS ord FROM json_each(:c)",
        touch="", chosen="IN (SELECT id FROM chosen)", returning=_EVENT_COLUMNS),
    # :forwards: a source id for each event leased to be forwarded
    "touch": _TOUCH.format(sids="IN (SELECT value FROM json_each(:sids))",
                           forwards="(SELECT count(*) FROM json_each(:forwards) "
                                    "WHERE value = hook_destinations.id)"),
}


class Take:
    """The take's statements for one database; HookStore.take_due runs them."""

    def __init__(self, dialect: Dialect, sqlite: bool):
        self.sqlite = sqlite
        made = _candidates_sqlite if sqlite else _candidates_pg
        self.candidates = {k: Sql(text(made(k)), dialect)
                           for k in (EXPIRED, DUE, ENDED, PROBE)}
        self.idle = Sql(text(made(DUE, idle=True)), dialect)
        sql = _SQLITE if sqlite else _PG
        self.sources = Sql(text(sql["sources"]), dialect)
        self.lease = Sql(text(sql["lease"]), dialect)
        self.touch = Sql(text(sql["touch"]), dialect) if sqlite else None
        # PostgreSQL's JIT compiles a statement whose estimate passes jit_above_cost (100,000
        # by default): the serial look's per-row estimate takes the candidates there, and
        # the compile cost 40-70 ms a take for a query that runs in 1 ms (EXPLAIN ANALYZE,
        # 1,000 keys queued). Off for the take's transaction only: nothing of it outlives
        # the transaction, so pgbouncer's transaction pooling stays safe (docs/scaling.md).
        self.no_jit = [] if sqlite else [(Sql(text("SET LOCAL jit = off"), dialect), {})]
        skip = "" if sqlite else " FOR UPDATE SKIP LOCKED"
        self.batch = UNPARK_BATCH  # read here: a test's smaller one applies to its Take
        self.park = Sql(text(_park(skip)), dialect)
        self.unpark = Sql(text(_unpark(skip, self.batch)), dialect)
        self.window = Sql(text(_window(self.batch)), dialect)
        self.unpark_after = 0  # the id the next sweep's window of parked events starts after

    def run(self, steps: Any, holder: str, now: int, limit: int, ended: bool,
            idle: bool = False) -> tuple[list[tuple], list[tuple], list[list]]:
        """In the caller's Database.steps: the sources' rows (as locked, before the lease
        wrote them), the leased events' rows, and the candidates ([event id, source id,
        kind, order]). With `idle` (not with `ended`), only the due events of sources that
        have nothing in flight, one per destination (_IDLE)."""
        kinds = (EXPIRED, DUE, ENDED, PROBE) if ended else (EXPIRED, DUE)
        params = {"now": now, "n": limit}
        # the sweep parks the held events first, and lets go those nothing holds
        after = {"now": now, "after": self.unpark_after}
        parking = [(self.window, after), (self.unpark, after), (self.park, {"now": now})] \
            if ended else []
        first = [*self.no_jit, *parking]
        looks = [(self.idle, params)] if idle else [(self.candidates[k], params) for k in kinds]
        found = steps.send([*first, *looks])
        if ended:  # the next window: after this one's last, or from the first again
            (seen, last), = found[len(self.no_jit)]
            self.unpark_after = last if seen >= self.batch else 0
        found = found[len(first):]
        candidates = [list(row) for rows in found for row in rows]
        if not candidates:
            return [], [], []
        sids = sorted({row[1] for row in candidates})
        probe_at = now + PROBE_SECONDS * SECOND
        lease = (self.lease, {"c": json.dumps(candidates), "now": now, "n": limit,
                              "holder": holder, "probe_at": probe_at})
        locked = (self.sources, {"sids": json.dumps(sids) if self.sqlite else sids})
        if self.touch is None:
            sources, leased = steps.send([locked, lease], last=True)
        else:
            sources, leased = steps.send([locked, lease])
            served = sorted({row[_EVENT_DESTINATION] for row in leased})
            kind_of = {row[0]: row[2] for row in candidates}
            forwards = [row[_EVENT_DESTINATION] for row in leased if kind_of[row[0]] != ENDED]
            steps.send([(self.touch, {"now": now, "sids": json.dumps(served),
                                      "forwards": json.dumps(forwards),
                                      "probe_at": probe_at})], last=True)
        return sources, leased, candidates
