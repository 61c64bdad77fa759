"""POST /hooks/<ingest_id>: check the provider's signature, take its event id, record the
event once (its record, body and headers in one transaction), and answer at once; the relay
forwards it. docs/webhooks/README.md's ingest table, in its order:

    unknown or disabled source      404 not_found
    body over the limit             413 payload_too_large      (the view reads the body)
    signature missing or wrong      401 invalid_signature       nothing stored; past its own
                                                                budget 429 (gateway/admission.py)
    source's rate spent             429 rate_limited            signed deliveries only
    Slack url_verification          200 {"challenge": ...}      nothing stored
    no event id                     400 invalid_request         nothing stored
    new event id                    202 accepted                after the commit
    seen, same body                 200 duplicate (+ Idempotent-Replayed: true)
    seen, other body                200 held: a review keeps the body for a person
A database error at any step is 503 with nothing stored: the provider resends later. So is
a destination removed while this process's cache still lists it (SourceChanged).
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Optional

from keystore_service import errors
from keystore_service.domain import records as domain
from keystore_service.domain.deliveries import DeliveryState
from keystore_service.domain.records import SECOND, Micros, Record
from keystore_service.domain.upkeep import claim_changes
from keystore_service.gateway import ordering, providers, rules
from keystore_service.gateway.admission import Admission
from keystore_service.gateway.held import held_kept
from keystore_service.gateway.notify import Notifier
from keystore_service.gateway.providers import Headers, Inbound, InvalidSignature, MissingEventId
from keystore_service.gateway.rules import Arrival
from keystore_service.service.fencing import new_lease_token
from keystore_service.service.grouping import Groups
from keystore_service.service.phases import AGAIN, Again, atomic_phase
from keystore_service.service.sealing import Sealer, SourceBroken
from keystore_service.storage.events import HookStore
from keystore_service.storage.records import RecordStore, new_record_values
from keystore_service.storage.reviews import ReviewStore
from keystore_service.storage.sources import Source, SourceStore

log = logging.getLogger("keystore.ingest")

# What a provider hears from a source no configured key opens: 503, so it resends later (the
# operator's page and GET /v1/sources say "broken", and what to fix).
BROKEN = ("this webhook source cannot take deliveries now: the key store cannot open its "
          "secrets (its operators see it as broken); resend later")


class SourceChanged(errors.Unavailable):
    """503 `unavailable`, nothing written: the source's destinations changed under this
    process's cache (a delivery's foreign key refused a destination removed since). Not a
    database outage (not counted as one); the resend reads the source afresh."""

    from_database = False


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: dict
    replayed: bool = False
    tenant: str = "-"
    source: str = "-"


@dataclass(frozen=True, slots=True)
class Opened:
    """A source with its secrets opened, cached for a few seconds per process."""

    source: Source
    secrets: list[str]
    views: tuple[Source, ...] = ()  # the source through each destination: a delivery each


def ingest_hash(ingest_id: str) -> str:
    return hashlib.sha256(ingest_id.encode("utf-8", "surrogatepass")).hexdigest()


class Ingest:
    def __init__(self, sources: SourceStore, events: HookStore, records: RecordStore,
                 reviews: ReviewStore, sealer: Sealer, clock: Callable[[], Micros],
                 cache_seconds: float = 5.0, wake: Callable[[], bool] = lambda: False,
                 received: Callable[[str, str, str], None] = lambda *a: None,
                 tenant_name: Callable[[int], str] = str, group_commit: bool = True,
                 admission: Optional[Admission] = None,
                 monotonic: Callable[[], float] = time.monotonic):
        self.sources, self.events, self.records, self.reviews = sources, events, records, \
            reviews
        self.sealer, self.clock, self._wake = sealer, clock, wake
        # This process's relay hears of an accepted event by a direct wake-up; the relays
        # of other processes by NOTIFY, sent after the commit and coalesced (Notifier), when
        # this process's relay cannot take it at once (wake()).
        self.notifier = None if events.sqlite else Notifier(events.notify_relays)
        # A new event is its record's claim and the event's row. PostgreSQL: one statement
        # (HookStore.claim_and_add). SQLite: the events this process's threads accept at the
        # same time share one transaction, one write lock (service/grouping.py).
        self.groups: Optional[Groups[tuple[dict, list[dict]], Arrival]] = Groups(
            self._record_new_many, lambda item: None) if group_commit and events.sqlite \
            else None
        self._received, self.tenant_name = received, tenant_name
        self.admission = admission or Admission()
        self.cache_seconds, self.monotonic = cache_seconds, monotonic
        self._cache: dict[str, tuple[Opened, float]] = {}
        self._lock = threading.Lock()

    def source(self, ingest_id: str) -> Opened:
        """The active source of an ingest id; NotFound otherwise, SourceBroken (503) when no
        configured key opens its secrets. A disabled source answers 404 from the next
        `cache_seconds` on in every worker (KEYSTORE_TOKEN_CACHE_SECONDS)."""
        key = ingest_hash(ingest_id)
        hit = self._cache.get(key)
        if hit is not None and hit[1] > self.monotonic():
            return hit[0]
        found = self.sources.by_ingest_hash(key)
        if found is None or not found.active:
            raise errors.NotFound("no such webhook source")
        try:
            opened = Opened(found, self.sealer.open(found.sealed)["secrets"],
                            tuple(self.sources.views(found)))
        except ValueError:  # sealed with a key since removed: this source only, never a 500
            self.received(found, "broken")
            raise SourceBroken(BROKEN, details={"reason": "source_broken"}) from None
        if self.cache_seconds > 0:
            with self._lock:
                if len(self._cache) > 10_000:  # bounds memory with many sources
                    self._cache.clear()
                self._cache[key] = (opened, self.monotonic() + self.cache_seconds)
        return opened

    def received(self, source: Source, status: str) -> None:
        self._received(self.tenant_name(source.tenant_id), source.name, status)

    def accept(self, opened: Opened, pairs: list[tuple[str, str]], body: bytes) -> Answer:
        """A delivery to `opened`'s ingest URL (its headers as (name, value) pairs), by the
        table above (after 404 and 413)."""
        source = opened.source
        now = self.clock()
        provider = providers.provider(source.provider)
        inbound = Inbound(Headers(pairs), body, now // SECOND)
        status = "invalid_signature"
        try:
            provider.verify(inbound, opened.secrets, source.provider_options)
            self.admission.signed(source.id)  # only a signed delivery spends the rate
            status = "invalid_request"
            challenge = provider.handshake(inbound)
            if challenge is not None:
                return Answer(200, challenge)
            event_id = provider.event_id(inbound, source.provider_options)
            event_type = provider.event_type(inbound, source.provider_options)
        except InvalidSignature as exc:
            self.received(source, status)
            self.admission.bad_signature(source.id)  # 429 once its own budget is spent
            raise errors.InvalidSignature(str(exc)) from None
        except MissingEventId as exc:
            self.received(source, status)
            raise errors.InvalidRequest(f"no event id: {exc}",
                                        details={"field": "event_id"}) from None
        fingerprint = rules.body_fingerprint(body, provider.volatile)
        kept = rules.kept_headers(pairs)  # as they came, names in their own case
        try:
            arrival = self._record(opened.views or (source,), event_id, fingerprint, body,
                                   kept, now, event_type)
        except self.events.db.integrity_errors:  # rolled back: nothing of it was written
            with self._lock:
                self._cache.pop(source.ingest_hash, None)
            raise SourceChanged("this webhook source changed while the event came in; "
                                "resend it") from None
        self.received(source, _STATUS[arrival])
        if arrival in (Arrival.NEW, Arrival.NEW_INCARNATION):
            self.wake()
            return Answer(202, {"status": "accepted", "event_id": event_id})
        return Answer(200, {"status": _STATUS[arrival], "event_id": event_id},
                      replayed=arrival is Arrival.DUPLICATE)

    def _record(self, views: tuple[Source, ...], event_id: str, fingerprint: str, body: bytes,
                headers: list, now: Micros, event_type: Optional[str] = None) -> Arrival:
        """The event's record and its deliveries, one per destination (`views`)."""
        source = views[0]
        _, token_hash = new_lease_token()  # the gateway holds it
        window_end = rules.window_end(now, source.retry_window_seconds)
        values = new_record_values(
            source.tenant_id, rules.scope_of(source.name), event_id, fingerprint, token_hash,
            now, window_end, now + source.ttl_seconds * SECOND, domain.OnStale.RETRY.value)
        common = {"tenant_id": source.tenant_id, "source_id": source.id, "event_id": event_id,
                  "state": DeliveryState.QUEUED.value, "body": body,
                  "headers": json.dumps(headers), "received_at": now, "window_start": now,
                  "next_attempt_at": now, "attempts": 0, "lease_holder": None,
                  "lease_until": None, "delivered_at": None, "body_dropped_at": None,
                  "event_type": event_type}
        events = [{**common, **dict(zip(("ordering_key", "ordering_mode"),
                                        ordering.held_key(view, body))),
                   "destination_id": view.destination_id} for view in views]
        # The usual cases first: a new event id, or a plain repeat.
        if self.groups is not None:
            arrival = self.groups.submit(_key(values), (values, events))
            if arrival is not None:
                return arrival
        elif not self.events.sqlite and len(events) == 1:  # one delivery: one statement
            row, added = self.events.claim_and_add(values, events[0])
            if row is not None:
                return Arrival.NEW if added else Arrival.DUPLICATE  # a repeat is counted

        def step(cur) -> Arrival | Again:
            arrival = self._record_new(cur, values, events)
            if arrival is not None:
                return arrival
            seen = self.records.get(source.tenant_id, values["scope"], event_id, cur)
            if seen is None:
                return AGAIN  # purged in between: insert again
            arrival = rules.decide_arrival(seen, fingerprint, now)
            if not self._write(cur, arrival, seen, values, events, body, headers, now):
                return AGAIN  # changed under us: decide again
            return arrival
        return atomic_phase(self.records.transaction, step,
                            "too much contention on this event; the provider resends")

    def _record_new(self, cur: Any, values: dict, events: list[dict]) -> Optional[Arrival]:
        """A new event id (recorded: NEW) or a plain repeat (counted by the statement:
        DUPLICATE); None when the record's state must be looked at (nothing written)."""
        row = self.records.claim(values, cur)  # insert, or count a plain repeat
        if row is not None and row.lease_token_hash == values["lease_token_hash"]:
            self.events.add_many(cur, [{"record_id": row.id, **event} for event in events])
            return Arrival.NEW
        return None if row is None else Arrival.DUPLICATE

    def _record_new_many(self, many: list[tuple[dict, list[dict]]]
                         ) -> dict[Hashable, Arrival]:
        """_record_new() of several events in one transaction: their records' claims as
        one statement (RecordStore.claim_many, in key order), the new events' rows as one
        executemany; an event whose claim came back empty is not answered here (nothing of
        it was written) and goes its own way."""
        out: dict[Hashable, Arrival] = {}
        added = []
        with self.records.transaction() as cur:
            claimed = self.records.claim_many([values for values, _ in many], cur)
            for values, events in many:
                got = claimed.get(_key(values))
                if got is None:
                    continue
                row = got[0]
                if row.lease_token_hash == values["lease_token_hash"]:
                    added.extend({"record_id": row.id, **event} for event in events)
                    out[_key(values)] = Arrival.NEW
                else:
                    out[_key(values)] = Arrival.DUPLICATE  # counted by the statement
            self.events.add_many(cur, added)
        return out

    def wake(self) -> None:
        """After the commit: this process's relay at once; the relays of other processes by
        NOTIFY only when this one cannot take the event now (none runs here, or its slots
        are full). Every relay LISTENs, so each NOTIFY woke all of them for an event that
        the accepting process's relay had already taken: with 4 workers, four takes per
        event, three of them finding nothing (bench/NOTES.md, "The gateway")."""
        if not self._wake() and self.notifier is not None:
            self.notifier.notify()

    def _write(self, cur, arrival: Arrival, seen: Record, values: dict, events: list[dict],
               body: bytes, headers: list, now: Micros) -> bool:
        if arrival is Arrival.HELD:  # body and headers kept up to 64 KiB together
            self.reviews.open_or_count(cur, seen, domain.ReviewKind.FINGERPRINT_MISMATCH, now,
                                       refused_fingerprint=values["fingerprint"],
                                       kept=held_kept(body, headers))
            return True
        if arrival is Arrival.DUPLICATE:
            changes, ended = claim_changes(domain.Action.COUNT_REPEAT, seen, "retry", values,
                                           now)
            return self.records.compare_and_set(seen, changes, cur, ended) is not None
        changes, ended = claim_changes(domain.Action.NEW_INCARNATION, seen, "retry", values,
                                       now)
        new = self.records.compare_and_set(seen, changes, cur, ended)
        if new is None:
            return False
        if seen.review_id is not None:
            self.reviews.close(cur, seen.id, "superseded", now)
        old = {e.destination_id: e for e in self.events.of_record(cur, seen.id)}
        for event in events:  # each destination's delivery starts again (or anew)
            fields = {k: v for k, v in event.items()
                      if k not in ("tenant_id", "source_id", "event_id", "destination_id")}
            if event["destination_id"] in old:
                self.events.reset(cur, old[event["destination_id"]], **fields)
            else:
                self.events.add(cur, record_id=new.id, **event)
        return True


def _key(values: dict) -> tuple:
    return values["tenant_id"], values["scope"], values["key"]


_STATUS = {Arrival.NEW: "accepted", Arrival.NEW_INCARNATION: "accepted",
           Arrival.DUPLICATE: "duplicate", Arrival.HELD: "held"}

