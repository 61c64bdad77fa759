"""The gateway's sources in SQL: create, read, change, disable, resume, and find one by its
ingest id's hash. Secrets stay sealed here; the service opens them (sealing.py)."""
from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, fields
from typing import Any, Optional

from sqlalchemy import and_, bindparam, case, delete, func, null, select, update

from keystore_service.domain.deliveries import DeliveryState as Q
from keystore_service.domain.records import Micros
from keystore_service.storage.db import Database
from keystore_service.storage.pauses import PauseChanged, PauseSql
from keystore_service.storage.sql import Sql
from keystore_service.storage.route_tables import hook_destinations
from keystore_service.storage.tables import hook_events, hook_sources, reviews

S, E, V, D = hook_sources.c, hook_events.c, reviews.c, hook_destinations.c


@dataclass(frozen=True, slots=True)
class Source:
    """A source as stored (times in Micros); `sealed` opens to {ingest_id, secrets,
    headers, destination_secret}; `config` is the provider options as JSON."""

    id: int
    tenant_id: int
    name: str
    provider: str
    ingest_hash: str
    sealed: str
    config: str
    destination_url: str
    timeout_seconds: int
    ttl_seconds: int
    retry_window_seconds: int
    max_in_flight: int
    keep_body_seconds: int
    state: str
    created_at: Micros
    updated_at: Micros
    paused_until: Optional[Micros]
    last_error: Optional[str]
    last_error_at: Optional[Micros]
    max_pause_seconds: int
    last_taken_at: Optional[Micros]
    # migration 0011: an operator's pause, and the probe of a failing destination
    operator_paused_at: Optional[Micros] = None
    operator_paused_until: Optional[Micros] = None
    pause_reason: Optional[str] = None
    failing_since: Optional[Micros] = None
    probe_at: Optional[Micros] = None
    # migration 0012: the thresholds of the source's issues
    alert_after_seconds: int = 300
    backlog_alert_seconds: int = 900
    # migration 0016: the destination's rate for the take's GCRA (null: none), and its debt
    rate_interval_us: Optional[int] = None
    rate_tat: Optional[Micros] = None
    # migration 0021: the destination this row sees the source through (its events' own)
    destination_id: int = 0
    destination_name: str = "default"
    # migration 0023: the destination's own forwarding options and sealed headers and secret
    # (None: the source's, as the v1.1 destination has them), and how many the source has
    destination_config: Optional[str] = None
    destination_sealed: Optional[str] = None
    fanout: int = 1
    destination_position: int = 0

    @property
    def forward(self) -> dict:
        """The destination's forwarding choices: retry_statuses, delivered_header, rate,
        filter, ordering (each absent when it has none)."""
        if self.destination_config is not None:
            return json.loads(self.destination_config)
        return self.options.get("forward", {})

    @property
    def options(self) -> dict:
        """All the source's options: the provider's (`signature`, `event_id`) and the
        destination's forwarding choices (`forward`)."""
        return json.loads(self.config)

    @property
    def provider_options(self) -> dict:
        """What the provider's rules are given: its options without `forward`."""
        return {k: v for k, v in self.options.items() if k != "forward"}

    @property
    def active(self) -> bool:
        return self.state == "active"


@dataclass(frozen=True, slots=True)
class Queue:
    """A source's forwarding queue as it stands; `held`: its events with an open
    fingerprint_mismatch review (a changed body held for a person); `next_attempt_at`: the
    earliest next attempt of its queued events (which a pause may push back)."""

    queued: int
    delivering: int
    failed: int
    oldest_queued_at: Optional[Micros]
    held: int = 0
    next_attempt_at: Optional[Micros] = None


CHANGEABLE = ("sealed", "config", "destination_url", "timeout_seconds", "ttl_seconds",
              "retry_window_seconds", "max_in_flight", "keep_body_seconds", "max_pause_seconds",
              "alert_after_seconds", "backlog_alert_seconds", "rate_interval_us", "rate_tat")
# Source's fields that are its destination's (hook_destinations, migration 0020): the field's
# column there. A source is read with its first destination (position 0: the v1.1 one).
OF_DESTINATION = {"destination_url": "url", "timeout_seconds": "timeout_seconds",
                  "max_in_flight": "max_in_flight", "paused_until": "paused_until",
                  "last_error": "last_error", "last_error_at": "last_error_at",
                  "last_taken_at": "last_taken_at", "operator_paused_at": "operator_paused_at",
                  "operator_paused_until": "operator_paused_until",
                  "pause_reason": "pause_reason", "failing_since": "failing_since",
                  "probe_at": "probe_at", "rate_interval_us": "rate_interval_us",
                  "rate_tat": "rate_tat", "destination_id": "id", "destination_name": "name",
                  "destination_config": "config", "destination_sealed": "sealed",
                  "destination_position": "position"}
_F = hook_destinations.alias("f")
# Source's fields read by a subquery: the take's SQL spells them in text (storage/take.py)
COMPUTED = {"fanout": select(func.count()).select_from(_F).where(
    _F.c.source_id == S.id).scalar_subquery()}
SOURCE_COLUMNS = [D[OF_DESTINATION[f.name]].label(f.name) if f.name in OF_DESTINATION
                  else COMPUTED[f.name].label(f.name) if f.name in COMPUTED
                  else S[f.name] for f in fields(Source)]
# a source and its first destination (the take's SQL spells the same in text: storage/take.py)
WITH_DESTINATION = hook_sources.join(hook_destinations, (D.source_id == S.id) &
                                     (D.tenant_id == S.tenant_id) & (D.position == 0))


# a source with each of its destinations (one row each: the forwarding's views of it)
WITH_DESTINATIONS = hook_sources.join(hook_destinations, (D.source_id == S.id) &
                                      (D.tenant_id == S.tenant_id))


def _read() -> Any:
    return select(*SOURCE_COLUMNS).select_from(WITH_DESTINATION)


class SourceStore:
    def __init__(self, db: Database):
        self.db = db
        d = db.engine.dialect
        names = [c.name for c in hook_sources.c if c.name != "id"]
        self._add = Sql(hook_sources.insert().values(
            {n: bindparam(n) for n in names}).returning(S.id), d)
        self._add_destination = Sql(hook_destinations.insert().values(
            {c.name: bindparam(c.name) for c in hook_destinations.c if c.name != "id"}), d)
        self._by_name = Sql(_read().where(
            S.tenant_id == bindparam("tenant_id"), S.name == bindparam("name")), d)
        self._by_id = Sql(_read().where(S.id == bindparam("id")), d)
        self._by_ingest = Sql(_read().where(S.ingest_hash == bindparam("h")), d)
        self._views = Sql(select(*SOURCE_COLUMNS).select_from(WITH_DESTINATIONS).where(
            S.id == bindparam("id"), S.tenant_id == bindparam("tid")).order_by(D.position), d)
        self._all = Sql(_read().where(S.tenant_id == bindparam("tenant_id"))
                        .order_by(S.name), d)
        sid, tid = bindparam("sid"), bindparam("tid")
        self._touched = Sql(update(hook_sources).where(S.id == sid, S.tenant_id == tid).values(
            updated_at=bindparam("now")), d)
        self._change = {n: Sql(update(hook_destinations).where(
            D.source_id == sid, D.tenant_id == tid, D.position == 0).values(
            {OF_DESTINATION[n]: bindparam(n)}) if n in OF_DESTINATION else
            update(hook_sources).where(S.id == sid, S.tenant_id == tid).values(
            {n: bindparam(n)}), d) for n in CHANGEABLE}
        self._unkey = Sql(update(hook_events).where(
            E.tenant_id == bindparam("tid"), E.destination_id == bindparam("did"),
            E.ordering_key.is_not(None)).values(
            ordering_key=null(), ordering_mode=null(), next_attempt_at=case(
                (and_(E.state == Q.QUEUED.value, E.next_attempt_at.is_(None)),
                 bindparam("now")), else_=E.next_attempt_at)), d)
        did = bindparam("did")
        self._delivers = Sql(select(E.id).where(E.tenant_id == tid, E.destination_id == did)
                             .limit(1), d)
        self._remove = Sql(delete(hook_destinations).where(D.id == did, D.tenant_id == tid), d)
        self._resume = Sql(update(hook_destinations).where(
            D.id == did, D.tenant_id == tid).values(paused_until=null()), d)
        # the destination's events whose next attempt the pause set (or a backoff it
        # outlasted): a range of the (destination, state, next attempt) index (0021)
        self._waited = Sql(update(hook_events).where(
            E.tenant_id == tid, E.destination_id == did, E.state == Q.QUEUED.value,
            E.next_attempt_at > bindparam("now"), E.next_attempt_at <= bindparam("until"))
            .values(next_attempt_at=bindparam("now")), d)
        # a rate's slots taken for events that made no forward (filtered, superseded)
        self._given_back = Sql(update(hook_destinations).where(
            D.id == bindparam("did"), D.tenant_id == bindparam("tid"),
            D.rate_tat.is_not(None), D.rate_interval_us.is_not(None)).values(
            rate_tat=D.rate_tat - D.rate_interval_us * bindparam("n")), d)
        self._state = Sql(update(hook_sources).where(S.id == bindparam("sid")).values(
            state=bindparam("state"), updated_at=bindparam("now")), d)
        self._p = PauseSql(d)  # an operator's pause, retry now, the queues (pauses.py)
        # from the tenant's open reviews (few) to their events, by the events' record_id
        self._held = Sql(select(E.source_id, func.count()).select_from(
            reviews.join(hook_events, E.record_id == V.record_id)).where(
            V.tenant_id == bindparam("tenant_id"), V.state == "open",
            V.kind == "fingerprint_mismatch").group_by(E.source_id), d)

    def create(self, cur: Any, **values: Any) -> Source:
        """A new source with its destination, `default` (a field with a default may be left
        out); the caller's IntegrityError when the tenant has the name already."""
        given = {f.name: f.default for f in fields(Source) if f.default is not MISSING} | values
        (sid,) = self._add.one(cur, {c.name: given[c.name] for c in hook_sources.c
                                     if c.name != "id"})
        self._add_destination.run(cur, {
            "tenant_id": given["tenant_id"], "source_id": sid, "position": 0,
            **{column: given[name] for name, column in OF_DESTINATION.items()
               if column != "id"}})
        return Source(*self._by_id.one(cur, {"id": sid}))

    def add_destination(self, cur: Any, source: Source, position: int, name: str,
                        values: dict) -> None:
        """A destination after the first: `values` its url, timeout_seconds, max_in_flight,
        rate_interval_us, rate_tat, config and sealed; the caller's IntegrityError for a
        name or position the source has."""
        self._add_destination.run(cur, {c.name: None for c in hook_destinations.c
                                        if c.name != "id"} | values | {
            "tenant_id": source.tenant_id, "source_id": source.id, "name": name,
            "position": position})

    def change_destination(self, cur: Any, view: Source, values: dict) -> None:
        """The columns `values` of the destination `view` is seen through."""
        stmt = update(hook_destinations).where(D.id == bindparam("did"),
                                               D.tenant_id == bindparam("tid")).values(
            {name: bindparam(name) for name in values})
        Sql(stmt, self.db.engine.dialect).run(cur, {"did": view.destination_id,
                                                     "tid": view.tenant_id, **values})

    def remove_destination(self, cur: Any, view: Source) -> bool:
        """Delete the destination `view` is seen through if no delivery goes to it (its
        kept versions go with it); False when one does (nothing is deleted)."""
        ids = {"did": view.destination_id, "tid": view.tenant_id}
        if self._delivers.one(cur, ids) is not None:
            return False
        self._remove.run(cur, ids)
        return True

    def named(self, tenant_id: int, name: str, cur: Any = None) -> Optional[Source]:
        row = self._one(self._by_name, {"tenant_id": tenant_id, "name": name}, cur)
        return Source(*row) if row else None

    def by_id(self, source_id: int, cur: Any = None) -> Optional[Source]:
        row = self._one(self._by_id, {"id": source_id}, cur)
        return Source(*row) if row else None

    def views(self, source: Source, cur: Any = None) -> list[Source]:
        """The source seen through each of its destinations, in their order (the first is
        `source` itself, as named() and by_id() read it)."""
        ids = {"id": source.id, "tid": source.tenant_id}
        if cur is not None:
            return [Source(*row) for row in self._views.all(cur, ids)]
        with self.db.connection() as c:
            return [Source(*row) for row in self._views.all(c, ids)]

    def by_ingest_hash(self, ingest_hash: str) -> Optional[Source]:
        row = self._one(self._by_ingest, {"h": ingest_hash})
        return Source(*row) if row else None

    def of_tenant(self, tenant_id: int) -> list[Source]:
        with self.db.connection() as cur:
            return [Source(*row) for row in self._all.all(cur, {"tenant_id": tenant_id})]

    def change(self, cur: Any, source: Source, changes: dict, now: Micros) -> None:
        ids = {"sid": source.id, "tid": source.tenant_id, "now": now}
        for name, value in changes.items():
            self._change[name].run(cur, {**ids, name: value})
        self._touched.run(cur, ids)

    def unkey(self, cur: Any, view: Source, now: Micros) -> None:
        """Forget the keys of the deliveries to `view`'s destination of an ordering it no
        longer has (another mode, key or none): its queued events are no longer held by
        it, and the parked ones (storage/take.py) are due now."""
        self._unkey.run(cur, {"tid": view.tenant_id, "did": view.destination_id, "now": now})

    def resume(self, cur: Any, views: list[Source], now: Micros) -> None:
        """End the pauses of each of `views` (destinations of one source, as read): the
        operator's (its time added to its waiting events' retry windows; PauseChanged when
        another writer ended it first) and the destination's (its queued events that waited
        for it are due now)."""
        for view in views:
            if view.operator_paused_at is not None:
                until = view.operator_paused_until
                self.end_pause(cur, view, now if until is None else min(until, now), now)
            if view.paused_until is not None:
                ids = {"did": view.destination_id, "tid": view.tenant_id}
                self._waited.run(cur, {**ids, "now": now, "until": view.paused_until})
                self._resume.run(cur, ids)

    def pause(self, cur: Any, views: list[Source], now: Micros, until: Optional[Micros],
              reason: Optional[str]) -> None:
        """An operator's pause of each of `views` until `until` (None: until resumed), or
        its new end and reason where one is on; one that ended by itself is cleared first
        (end_pause), so that a destination keeps its own beginning."""
        for view in views:
            ended = view.operator_paused_until
            if view.operator_paused_at is not None and ended is not None and ended <= now:
                self.end_pause(cur, view, ended, now)
            self._p.start.run(cur, {"did": view.destination_id, "tid": view.tenant_id,
                                    "now": now, "until": until, "reason": reason})
        self._p.touched.run(cur, {"sid": views[0].id, "tid": views[0].tenant_id, "now": now})

    def end_pause(self, cur: Any, view: Source, end: Micros, now: Micros) -> None:
        """Clear the operator's pause of `view`'s destination as read (begun at
        operator_paused_at, over at `end`) and move the retry windows of the deliveries it
        held on by its length; PauseChanged (roll back) when another writer ended it first."""
        params = {"sid": view.id, "tid": view.tenant_id, "did": view.destination_id,
                  "started": view.operator_paused_at, "end": end, "now": now}
        self._p.shift.run(cur, params)
        if self._p.end.one(cur, params) is None:
            raise PauseChanged()
        self._p.touched.run(cur, params)

    def expired_pauses(self, now: Micros) -> list[tuple[int, int, int]]:
        """Every tenant's operator pauses that ended by themselves and are not cleared yet:
        (source id, tenant id, destination id)."""
        with self.db.connection() as cur:
            return [tuple(row) for row in self._p.expired.all(cur, {"now": now})]

    def retry_now(self, cur: Any, source: Source, event_pk: Optional[int],
                  now: Micros) -> int:
        """The queued event `event_pk` (None: every queued event of the source) due now,
        whatever its backoff; how many of the source's queued events are due now (of the
        one event: 1 when it is queued, else 0)."""
        params = {"sid": source.id, "tid": source.tenant_id, "now": now, "eid": event_pk}
        if event_pk is not None:
            return 0 if self._p.retry_one.one(cur, params) is None else 1
        self._p.retry_all.run(cur, params)
        return self._p.due.one(cur, params)[0]

    def given_back(self, destination_id: int, tenant_id: int, n: int) -> tuple[Sql, dict]:
        """The statement that gives back the rate's slots of n events that took one in the
        take and made no forward (Database.steps): the destination's GCRA goes back n."""
        return self._given_back, {"did": destination_id, "tid": tenant_id, "n": n}

    def set_state(self, cur: Any, source: Source, state: str, now: Micros) -> None:
        self._state.run(cur, {"sid": source.id, "state": state, "now": now})

    def queues(self, tenant_id: int) -> dict[int, Queue]:
        """Each source's queue (of the sources with one): queued, being forwarded, failed,
        the oldest queued, held, and the earliest next attempt of the queued."""
        counts: dict[int, dict] = {}

        def of(source_id: int) -> dict:
            return counts.setdefault(source_id, {"queued": 0, "delivering": 0, "failed": 0,
                                                 "oldest": None, "held": 0, "next": None})
        params = {"tenant_id": tenant_id}
        with self.db.connection() as cur:
            for source_id, queued, delivering, failed, oldest, next_at in \
                    self._p.queues.all(cur, params):
                if queued or delivering or failed:
                    of(source_id).update(queued=queued, delivering=delivering, failed=failed,
                                         oldest=oldest, next=next_at)
            for source_id, n in self._held.all(cur, params):
                of(source_id)["held"] = n
        return {sid: Queue(c["queued"], c["delivering"], c["failed"], c["oldest"], c["held"],
                           c["next"]) for sid, c in counts.items()}

    def transaction(self):
        return self.db.transaction()

    def _one(self, stmt: Sql, params: dict, cur: Any = None) -> Optional[tuple]:
        if cur is not None:
            return stmt.one(cur, params)
        with self.db.connection() as c:
            return stmt.one(c, params)


assert {c.name for c in hook_sources.c} | set(OF_DESTINATION) | set(COMPUTED) == {
    f.name for f in fields(Source)}, "a field of Source is a column of neither table"
