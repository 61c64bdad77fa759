"""Deliveries, as operators see and mend them: list them (newest first, with their newest
attempts), and redeliver one under the same identity (same Idempotency-Key and webhook-id,
Keystore-Attempt counting on, the retry window starting again)."""
from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from keystore_service import errors
from keystore_service.domain import records as domain
from keystore_service.domain.deliveries import DeliveryState
from keystore_service.domain.records import Micros, Record, State
from keystore_service.gateway import rules
from keystore_service.storage.events import Attempt, Event, HookStore
from keystore_service.storage.records import RecordStore
from keystore_service.storage.reviews import Review, ReviewStore
from keystore_service.storage.sources import Source, SourceStore


@dataclass(frozen=True, slots=True)
class Delivery:
    source: str
    event: Event
    attempts: list[Attempt]
    waiting_on: Optional[str] = None  # the event id a serial destination holds it behind
    destination: str = "default"  # the name of the source's destination it goes to
    of: int = 1  # how many deliveries its event has (one per destination)

    @property
    def named(self) -> Optional[str]:
        """Its destination's name where one must be named (its event has several)."""
        return self.destination if self.of > 1 else None


@dataclass(frozen=True, slots=True)
class Detail:
    """One event as a person looks into it: its source, the event with its body (None once
    dropped), its newest attempts (oldest first), its record, and the record's open reviews
    (a held body's review keeps the refused delivery in `kept`)."""

    source: Source  # seen through the delivery's destination
    event: Event
    attempts: list[Attempt]
    record: Record
    reviews: list[Review]
    waiting_on: Optional[str] = None  # as Delivery's
    destination: str = "default"  # as Delivery's
    # every delivery of the event, one per destination: (its destination's name, it)
    deliveries: tuple[tuple[str, Event], ...] = ()


class Deliveries:
    def __init__(self, sources: SourceStore, events: HookStore, records: RecordStore,
                 reviews: ReviewStore, clock: Callable[[], Micros],
                 wake: Callable[[], None] = lambda: None):
        self.sources, self.events, self.records, self.reviews = sources, events, records, \
            reviews
        self.clock, self.wake = clock, wake

    def list(self, tenant_id: int, source: Optional[str] = None, state: Optional[str] = None,
             event_id: Optional[str] = None, limit: int = 50,
             cursor: Optional[str] = None, event_type: Optional[str] = None,
             destination: Optional[str] = None) -> tuple[list[Delivery], Optional[str]]:
        """Deliveries newest first (no body), with the cursor of the next page; `event_type`
        is a glob (domain/bulk.py); `destination` a destination's name."""
        after = _decode(cursor) if cursor else None
        rows, attempts = self.events.page(tenant_id, source, state, event_id, limit + 1, after,
                                          event_type, now=self.clock(), destination=destination)
        out = [Delivery(name, event, attempts.get(event.id, []), waiting, to, n)
               for name, event, waiting, to, n in rows[:limit]]
        last = out[-1].event if out else None
        return out, (_encode(last.received_at, last.id) if len(rows) > limit and last else None)

    def detail(self, tenant_id: int, source_name: str, event_id: str,
               destination: Optional[str] = None) -> Detail:
        """The event `event_id` of the tenant's source `source_name`, its delivery to
        `destination` (None: to the first); NotFound when there is no such source, event or
        destination (another tenant's are not found either)."""
        source = self.sources.named(tenant_id, source_name)
        if source is None:
            raise errors.NotFound(f"no source named {source_name!r}")
        with self.events.db.connection() as cur:
            record = self.records.get(tenant_id, rules.scope_of(source.name), event_id, cur)
            views = {v.destination_id: v for v in self.sources.views(source, cur)}
            names = {did: v.destination_name for did, v in views.items()}
            every = self.events.of_record(cur, record.id) if record is not None else []
            event = _pick(every, names, destination, one=False)
            attempts = self.events.attempts_of(cur, [event.id]).get(event.id, [])
            reviews = self.reviews.open_of(cur, record.id)
            waiting = self.events.waiting_on(cur, event, self.clock())
        return Detail(views.get(event.destination_id, source), event, attempts, record,
                      reviews, waiting, names.get(event.destination_id, "default"),
                      tuple((names.get(e.destination_id, "default"), e) for e in every))

    def redeliver(self, tenant_id: int, source_name: str, event_id: str,
                  force: bool = False, destination: Optional[str] = None) -> Delivery:
        """Forward the event again: 409 in_progress while queued or being forwarded, 409
        already_completed for a delivered one without `force`, 409 body_dropped when its body
        is gone. A filtered one needs no `force` (nothing was sent, so nothing goes twice):
        it is queued, and its destination's filter is applied again at its turn; so does a
        superseded one, compared again with its key's last delivered version at its turn.
        Closes its delivery_failed review (resolution `redelivered`). Of an event with
        several deliveries, the one to `destination` (400 without it): the others stay."""
        now = self.clock()
        source = self.sources.named(tenant_id, source_name)
        if source is None:
            raise errors.NotFound(f"no source named {source_name!r}")
        with self.events.transaction() as cur:
            event = self._event(cur, tenant_id, source, event_id, destination)
            record = self.records.by_id(cur, event.record_id)
            if event.state in (DeliveryState.QUEUED, DeliveryState.DELIVERING):
                raise errors.InProgress("the event is queued or being forwarded")
            if event.state == DeliveryState.DELIVERED and not force:
                raise errors.AlreadyCompleted("the event was delivered; redeliver it with "
                                              "force: true")
            if event.body is None:
                raise errors.BodyDropped()
            again = self.events.redeliver(cur, event, now)
            if again is None:  # changed under us: another redelivery won
                raise errors.InProgress("the event is queued or being forwarded")
            # The record is in progress again, unless another of its deliveries stays
            # failed: then it stays failed (any delivery failed for good fails it), and the
            # redelivery of that last one moves it.
            failed = self.events.states_of(cur, tenant_id, event.record_id).get(
                DeliveryState.FAILED.value, 0)
            if record is not None and record.state in domain.FINISHED and not failed:
                window_end = rules.window_end(now, source.retry_window_seconds)
                self.records.compare_and_set(record, {
                    "state": State.IN_PROGRESS.value, "lease_expires_at": window_end,
                    "result": None, "result_resource_id": None}, cur)
            name = self._name(cur, source, event)
            self.reviews.close(cur, record.id, "redelivered", now,
                               kind=domain.ReviewKind.DELIVERY_FAILED.value, destination=name,
                               tenant_id=tenant_id)
        self.wake()
        return Delivery(source.name, again, [], None, name)

    def _name(self, cur, source: Source, event: Event) -> str:
        """The name of the destination of the delivery `event`."""
        return next((v.destination_name for v in self.sources.views(source, cur)
                     if v.destination_id == event.destination_id), source.destination_name)


    def retry(self, tenant_id: int, source_name: str, event_id: Optional[str] = None,
              destination: Optional[str] = None) -> int:
        """Retry now: the queued event `event_id` (None: every queued event of the source)
        is due at once, whatever its backoff (a pause still holds it: resume ends that);
        how many of them are due now. NotFound for no such source or event; for an event
        that is not queued, 409 with its state in details: in_progress while it is being
        forwarded, already_completed once it was delivered or failed (redeliver it)."""
        now = self.clock()
        source = self.sources.named(tenant_id, source_name)
        if source is None:
            raise errors.NotFound(f"no source named {source_name!r}")
        with self.events.transaction() as cur:
            if event_id is None:
                due = self.sources.retry_now(cur, source, None, now)
            else:
                event = self._event(cur, tenant_id, source, event_id, destination)
                due = self.sources.retry_now(cur, source, event.id, now)
                if not due:
                    raise _not_queued(self.events.by_id(cur, event.id) or event)
        self.wake()
        return due

    def _event(self, cur, tenant_id: int, source: Source, event_id: str,
               destination: Optional[str]) -> Event:
        """The event's delivery to `destination`; of an event with one delivery, that one."""
        record = self.records.get(tenant_id, rules.scope_of(source.name), event_id, cur)
        every = self.events.of_record(cur, record.id) if record is not None else []
        names = {v.destination_id: v.destination_name for v in self.sources.views(source, cur)}
        return _pick(every, names, destination, one=True)


def _pick(every: list[Event], names: dict[int, str], destination: Optional[str],
          one: bool) -> Event:
    """The delivery to the destination named `destination` among an event's `every`; None:
    the first, which must be the only one when `one` (400 naming the field)."""
    if destination is not None:
        if destination not in names.values():
            raise errors.NotFound(f"no destination named {destination!r} of this source")
        every = [e for e in every if names.get(e.destination_id) == destination]
    elif one and len(every) > 1:
        raise errors.InvalidRequest(
            "this event has a delivery to each of its source's destinations: name one "
            f"({', '.join(sorted(names.get(e.destination_id, '?') for e in every))})",
            details={"field": "destination"})
    if not every:
        raise errors.NotFound("no such event of this source")
    return every[0]


def _not_queued(event: Event) -> errors.KeystoreError:
    """The refusal of a retry of an event that is not queued, with its state."""
    details = {"state": event.state, "reason": "not_queued"}
    if event.state == DeliveryState.DELIVERING:
        return errors.InProgress("the event is being forwarded right now", details=details)
    return errors.AlreadyCompleted(f"the event is {event.state}, not queued: redeliver it "
                                   "to forward it again", details=details)


def _encode(received_at: int, pk: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([received_at, pk]).encode()).decode().rstrip("=")


def _decode(cursor: str) -> tuple[int, int]:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, pk = json.loads(text)
        ok = all(type(v) is int and 0 <= v < 2 ** 63 for v in (at, pk))
        if not ok or _encode(at, pk) != cursor:
            raise ValueError
        return at, pk
    except (ValueError, TypeError, UnicodeDecodeError):
        raise errors.InvalidRequest("the cursor is not one this service gave out",
                                    details={"field": "cursor"}) from None
