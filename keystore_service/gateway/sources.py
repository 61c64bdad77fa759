"""Sources, as operators manage them: create (its ingest id made here and shown once in its
URL, every secret sealed), read (secrets never returned), change (secrets rotated, the
destination moved), disable (the ingest URL answers 404; accepted events still go out)."""
from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from keystore_service import errors
from keystore_service.domain import route_specs
from keystore_service.domain.names import NAME
from keystore_service.domain.records import SECOND, Micros
from keystore_service.gateway import destinations, providers
from keystore_service.gateway.destinations import Policy
from keystore_service.gateway.ingest import ingest_hash
from keystore_service.gateway.outbound import Outbound
from keystore_service.gateway.provider_options import check_secrets, plain, provider_config
from keystore_service.gateway.source_destinations import (
    Planned,
    dotted,
    held_by,
    interval,
    planned,
)
from keystore_service.service.phases import AGAIN, Again, retry_on_conflict
from keystore_service.service.sealing import Sealer, SourceBroken
from keystore_service.storage.pauses import PauseChanged
from keystore_service.storage.sources import Queue, Source, SourceStore

DAY = 86_400
# An operator's pause ends within a year: a longer one is a typo (a year 2062) or a source to
# disable; a pause without an end is the way to say "until I resume it".
PAUSE_AHEAD_DAYS = 366
INGEST_ID_BYTES = 32  # 43 random URL-safe characters (docs/webhooks/README.md, "Security model")


# What an operator is told about a source whose secrets no configured key opens.
BROKEN = ("no key of this key store's KEYSTORE_SECRET_KEY opens this source's secrets (it was "
          "sealed with a key since removed): put that key back in KEYSTORE_SECRET_KEY (after "
          "the first), or create the source again under a new name and disable this one")


@dataclass(frozen=True, slots=True)
class Shown:
    """A source as the API shows it: the stored row, its ingest id, how many signing
    secrets it has, its destination's header names, its queue and health. A broken source
    (no configured key opens it) has no ingest id, secret count or header names to show."""

    source: Source
    ingest_id: Optional[str]
    secret_count: Optional[int]
    header_names: list[str]
    has_destination_secret: Optional[bool]
    queue: Queue
    health: str = "ok"  # "ok" | "failing" (its newest forward failed) | "broken"
    paused: Optional[Paused] = None  # None: it forwards
    destinations: tuple[Through, ...] = ()  # each of its destinations, the first first


@dataclass(frozen=True, slots=True)
class Through:
    """One of a source's destinations as shown: the source seen through it, its header
    names and whether it signs (None: its secrets cannot be opened), its health."""

    view: Source
    header_names: list[str]
    has_secret: Optional[bool]
    health: str
    paused: Optional[Paused] = None  # None: it forwards


@dataclass(frozen=True, slots=True)
class Paused:
    """A source's pause as shown: `by` "operator" (POST .../pause) or "destination" (a 429
    or 503 with Retry-After); `until` None: until resumed; `reason` the operator's words or
    the destination's answer. An operator's pause is shown first when both are on."""

    by: str
    until: Optional[Micros]
    reason: Optional[str]


def paused_of(source: Source, now: Micros) -> Optional[Paused]:
    began, until = source.operator_paused_at, source.operator_paused_until
    if began is not None and (until is None or until > now):
        return Paused("operator", until, source.pause_reason)
    if source.paused_until is not None and source.paused_until > now:
        return Paused("destination", source.paused_until, source.last_error)
    return None


class Sources:
    def __init__(self, store: SourceStore, sealer: Sealer, clock: Callable[[], Micros],
                 allow_link_local: bool = False, outbound: Optional[Outbound] = None):
        self.store, self.sealer, self.clock = store, sealer, clock
        # the destination rules, as the relay applies them where it connects
        self.outbound = outbound or Outbound(Policy("any", allow_link_local))

    def create(self, tenant_id: int, body: Any) -> Shown:
        """A new source from a validated SourceCreate; InvalidRequest for what the schema
        cannot know (an unknown provider, a secret it cannot use, a TTL shorter than its
        forwarding window plus a day, a refused destination)."""
        provider = self._provider(body.provider)
        config = provider_config(provider.name, plain(body.signature), plain(body.event_id),
                         plain(body.event_type))
        plan = planned(body.destination, body.destinations, required=True)
        dest = plan[0]
        config["forward"] = dest.forward
        signing = list(body.secrets or [])
        check_secrets(provider, signing, config)
        for each in plan:
            self._check_destination(each.url, each.secret, each.at)
        ttl = body.ttl_seconds or provider.default_ttl_seconds(body.retry_window_seconds)
        _check_ttl(ttl, body.retry_window_seconds)
        ingest_id = secrets.token_urlsafe(INGEST_ID_BYTES)
        sealed = self.sealer.seal({"ingest_id": ingest_id, "secrets": signing,
                                   "headers": dest.headers, "destination_secret": dest.secret})
        now = self.clock()
        with self.store.transaction() as cur:
            if self.store.named(tenant_id, body.name, cur) is not None:
                raise errors.InvalidRequest(f"this tenant has a source named {body.name!r} "
                                            "already (a disabled source keeps its name)",
                                            details={"field": "name"})
            source = self.store.create(
                cur, tenant_id=tenant_id, name=body.name, provider=provider.name,
                ingest_hash=ingest_hash(ingest_id), sealed=sealed, config=json.dumps(config),
                destination_url=dest.url, timeout_seconds=dest.timeout_seconds,
                destination_name=dest.name,
                ttl_seconds=ttl, retry_window_seconds=body.retry_window_seconds,
                max_in_flight=dest.max_in_flight or body.max_in_flight,
                keep_body_seconds=body.keep_body_seconds,
                state="active", created_at=now, updated_at=now, paused_until=None,
                last_error=None, last_error_at=None,
                max_pause_seconds=body.max_pause_seconds, last_taken_at=None,
                rate_interval_us=interval(config["forward"]),
                alert_after_seconds=body.alert_after_seconds,
                backlog_alert_seconds=body.backlog_alert_seconds)
            for position, each in enumerate(plan[1:], 1):
                self.store.add_destination(cur, source, position, each.name,
                                           self._own(each, body.max_in_flight))
        return self._shown(source, Queue(0, 0, 0, None))

    def get(self, tenant_id: int, name: str) -> Shown:
        source = self._named(tenant_id, name)
        return self._shown(source, self.store.queues(tenant_id).get(source.id,
                                                                   Queue(0, 0, 0, None)))

    def all(self, tenant_id: int) -> list[Shown]:
        queues = self.store.queues(tenant_id)
        return [self._shown(s, queues.get(s.id, Queue(0, 0, 0, None)))
                for s in self.store.of_tenant(tenant_id)]

    def overview(self, tenant_id: int) -> list[tuple[Source, Queue]]:
        """Each source of the tenant (by name) with its queue, its secrets left sealed: what
        the operators' page lists (it shows no secret, ingest id or header value)."""
        queues = self.store.queues(tenant_id)
        return [(s, queues.get(s.id, Queue(0, 0, 0, None)))
                for s in self.store.of_tenant(tenant_id)]

    def change(self, tenant_id: int, name: str, body: Any) -> Shown:
        """A SourceChange: what is given changes (all or nothing)."""
        source = self._named(tenant_id, name)
        provider = providers.provider(source.provider)
        sealed = self._open(source)
        config = source.options
        if body.signature is not None or body.event_id is not None or \
                body.event_type is not None:
            config = {**provider_config(provider.name,
                                         plain(body.signature) or config.get("signature"),
                                         plain(body.event_id) or config.get("event_id"),
                                         plain(body.event_type) or config.get("event_type")),
                      "forward": config.get("forward", {})}
        if body.secrets is not None:
            sealed["secrets"] = list(body.secrets)
        check_secrets(provider, sealed["secrets"], config)
        changes: dict[str, Any] = {}
        views = self.store.views(source)
        plan = planned(body.destination, body.destinations, required=False,
                       default_name=source.destination_name)
        given = {p.name: p for p in plan or ()}
        if plan is not None and views[0].destination_name not in given:
            raise errors.InvalidRequest(
                f"destinations: the first destination, {views[0].destination_name!r}, stays "
                "(its deliveries and the v1.1 `destination` are its): give it too",
                details={"field": "destinations"})
        for each in plan or ():
            self._check_destination(each.url, each.secret, each.at)
        if (dest := given.get(views[0].destination_name)) is not None:
            config["forward"] = dest.forward
            sealed.update(headers=dest.headers, destination_secret=dest.secret)
            changes.update(destination_url=dest.url, timeout_seconds=dest.timeout_seconds,
                           rate_interval_us=interval(config["forward"]), rate_tat=None)
            if dest.max_in_flight is not None:
                changes["max_in_flight"] = dest.max_in_flight
        changes["config"] = json.dumps(config)  # with the new destination's forward options
        for name_ in ("ttl_seconds", "retry_window_seconds", "max_in_flight",
                      "keep_body_seconds", "max_pause_seconds", "alert_after_seconds",
                      "backlog_alert_seconds"):
            if getattr(body, name_) is not None:
                changes[name_] = getattr(body, name_)
        _check_ttl(changes.get("ttl_seconds", source.ttl_seconds),
                   changes.get("retry_window_seconds", source.retry_window_seconds))
        changes["sealed"] = self.sealer.seal(sealed)
        now = self.clock()
        with self.store.transaction() as cur:
            self.store.change(cur, source, changes, now)
            if held_by(config.get("forward", {})) != held_by(source.forward):
                self.store.unkey(cur, source, now)  # held by the ordering it had
            if plan is not None:
                self._destinations(cur, source, views[1:], plan, now)
        return self.get(tenant_id, name)

    def _destinations(self, cur: Any, source: Source, later: list[Source],
                      plan: list[Planned], now: Micros) -> None:
        """The destinations after the first as `plan` has them: each kept one changed (its
        keys forgotten when its ordering changed), each new one added at the first free
        position, each left out removed; 400 for one left out that has deliveries."""
        given = {p.name: p for p in plan[1:] if p.name != source.destination_name}
        for view in later:
            if view.destination_name not in given and not self.store.remove_destination(
                    cur, view):
                raise errors.InvalidRequest(
                    f"destinations: {view.destination_name!r} has deliveries and stays: give it "
                    "too (a pause stops its forwarding)", details={"field": "destinations"})
        kept = {v.destination_name: v for v in later if v.destination_name in given}
        free = iter(sorted(set(range(1, route_specs.MAX_DESTINATIONS))
                           - {v.destination_position for v in kept.values()}))
        for name_, each in given.items():
            own = self._own(each, kept[name_].max_in_flight if name_ in kept
                            else source.max_in_flight)
            if name_ not in kept:
                self.store.add_destination(cur, source, next(free), name_, own)
                continue
            self.store.change_destination(cur, kept[name_], own)
            if held_by(each.forward) != held_by(kept[name_].forward):
                self.store.unkey(cur, kept[name_], now)

    def _own(self, each: Planned, max_in_flight: int) -> dict:
        """A later destination's own row: its limits, choices and sealed secrets."""
        return each.row(max_in_flight) | {"config": json.dumps(each.forward), "sealed":
                                          self.sealer.seal({"headers": each.headers,
                                                            "destination_secret": each.secret})}

    def resume(self, tenant_id: int, name: str, destination: Optional[str] = None) -> Shown:
        """End the pauses of the source's destination named `destination` (None: of every
        one), an operator's (its time does not count toward the retry windows of the events
        it held) and a destination's (its waiting events are due at once), whatever their
        end. One that is not paused is left as it is; NotFound for an unknown name."""
        self._paused(tenant_id, name, destination, lambda cur, views, now: self.store.resume(
            cur, views, now))
        return self.get(tenant_id, name)

    def pause(self, tenant_id: int, name: str, until: Optional[Micros],
              reason: Optional[str], destination: Optional[str] = None) -> Shown:
        """An operator's pause of the source's destination named `destination` (None: of
        every one) until `until` (None: until resumed), or a new end and reason for the one
        on. Events are still accepted; none is forwarded there, none fails meanwhile.
        InvalidRequest for an end not in the future or over a year ahead; NotFound for an
        unknown destination."""
        now = self.clock()
        if until is not None and not now < until <= now + PAUSE_AHEAD_DAYS * DAY * SECOND:
            raise errors.InvalidRequest(
                f"until is in the future and at most {PAUSE_AHEAD_DAYS} days ahead (or "
                "absent: paused until resumed)", details={"field": "until"})
        self._paused(tenant_id, name, destination, lambda cur, views, now: self.store.pause(
            cur, views, now, until, reason))
        return self.get(tenant_id, name)

    def _paused(self, tenant_id: int, name: str, destination: Optional[str],
                step: Callable[[Any, list[Source], Micros], None]) -> None:
        """`step` in a transaction on the destinations as they are now (the one named, or
        all); read and done again when another writer ended a pause meanwhile (PauseChanged:
        rolled back, so a pause's time is added to the windows once)."""
        def round_() -> Optional[Again]:
            views = self.store.views(self._named(tenant_id, name))
            chosen = [v for v in views if destination in (None, v.destination_name)]
            if not chosen:
                raise errors.NotFound(f"the source {name!r} has no destination named "
                                      f"{destination!r}", details={"field": "destination"})
            try:
                with self.store.transaction() as cur:
                    step(cur, chosen, self.clock())
            except PauseChanged:
                return AGAIN
            return None
        retry_on_conflict(round_, "the source's pause kept changing; try again")

    def disable(self, tenant_id: int, name: str) -> Shown:
        source = self._named(tenant_id, name)
        with self.store.transaction() as cur:
            self.store.set_state(cur, source, "disabled", self.clock())
        return self.get(tenant_id, name)

    def _named(self, tenant_id: int, name: str) -> Source:
        # a name no source can have is not looked up (PostgreSQL refuses a NUL in a query)
        source = self.store.named(tenant_id, name) if NAME.fullmatch(name) else None
        if source is None:
            raise errors.NotFound(f"no source named {name!r}")
        return source

    def broken(self, tenant_id: int) -> set[int]:
        """The ids of the tenant's sources that no configured key opens (for the page)."""
        return {s.id for s in self.store.of_tenant(tenant_id) if not self._opens(s)}

    def _opens(self, source: Source) -> bool:
        try:
            self.sealer.open(source.sealed)
        except ValueError:
            return False
        return True

    def _open(self, source: Source) -> dict:
        """Its secrets; SourceBroken (503, naming the setting) when no configured key opens
        them: they cannot be changed, only the source disabled."""
        try:
            return self.sealer.open(source.sealed)
        except ValueError:
            raise SourceBroken(BROKEN, details={"reason": "source_broken",
                                                "setting": "KEYSTORE_SECRET_KEY"}) from None

    def _shown(self, source: Source, queue: Queue) -> Shown:
        now = self.clock()
        through = tuple(self._through(v, now) for v in self.store.views(source))
        try:
            sealed = self.sealer.open(source.sealed)
        except ValueError:  # shown as broken; the list never fails for one source
            return Shown(source, None, None, [], None, queue, "broken",
                         paused_of(source, now), through)
        return Shown(source, sealed["ingest_id"], len(sealed["secrets"]),
                     sorted(sealed.get("headers") or {}),
                     bool(sealed.get("destination_secret")), queue,
                     "failing" if source.last_error else "ok", paused_of(source, now), through)

    def _through(self, view: Source, now: Micros) -> Through:
        paused = paused_of(view, now)
        try:
            sealed = self.sealer.open(view.destination_sealed or view.sealed)
        except ValueError:
            return Through(view, [], None, "broken", paused)
        return Through(view, sorted(sealed.get("headers") or {}),
                       bool(sealed.get("destination_secret")),
                       "failing" if view.last_error else "ok", paused)

    def _provider(self, name: str) -> providers.Provider:
        if name not in providers.names():
            raise errors.InvalidRequest(
                f"the provider is one of {', '.join(providers.names())}",
                details={"field": "provider"})
        return providers.provider(name)

    def _check_destination(self, url: str, secret: Optional[str], at: str) -> None:
        try:
            self.outbound.check(url)
        except destinations.Refused as exc:
            raise errors.InvalidRequest(str(exc), details={"field": dotted(f"{at}.url")}) \
                from None
        if secret is not None:
            try:
                providers.provider("standard").check_secret(secret)
            except providers.BadSecret as exc:
                raise errors.InvalidRequest(f"{at}.secret: {exc}",
                                            details={"field": dotted(f"{at}.secret")}) from None


def _check_ttl(ttl: int, retry_window: int) -> None:
    if ttl < retry_window + DAY:
        raise errors.InvalidRequest(
            "ttl_seconds must be at least retry_window_seconds plus a day: an event id is "
            "never forgotten while its forwarding is still retried",
            details={"field": "ttl_seconds", "minimum": retry_window + DAY})
