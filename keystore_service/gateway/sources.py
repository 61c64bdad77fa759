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
from keystore_service.domain.routing import Ordering
from keystore_service.gateway import destinations, providers
from keystore_service.gateway.destinations import Policy
from keystore_service.gateway.ingest import ingest_hash
from keystore_service.gateway.outbound import Outbound
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
        config = _config(provider.name, _plain(body.signature), _plain(body.event_id),
                         _plain(body.event_type))
        config["forward"] = _forward(body.destination)
        signing = list(body.secrets or [])
        _check_secrets(provider, signing, config)
        dest = body.destination
        self._check_destination(dest.url, dest.secret)
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
                ttl_seconds=ttl, retry_window_seconds=body.retry_window_seconds,
                max_in_flight=body.max_in_flight, keep_body_seconds=body.keep_body_seconds,
                state="active", created_at=now, updated_at=now, paused_until=None,
                last_error=None, last_error_at=None,
                max_pause_seconds=body.max_pause_seconds, last_taken_at=None,
                rate_interval_us=_interval(config["forward"]),
                alert_after_seconds=body.alert_after_seconds,
                backlog_alert_seconds=body.backlog_alert_seconds)
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
            config = {**_config(provider.name,
                                _plain(body.signature) or config.get("signature"),
                                _plain(body.event_id) or config.get("event_id"),
                                _plain(body.event_type) or config.get("event_type")),
                      "forward": config.get("forward", {})}
        if body.secrets is not None:
            sealed["secrets"] = list(body.secrets)
        _check_secrets(provider, sealed["secrets"], config)
        changes: dict[str, Any] = {}
        if body.destination is not None:
            dest = body.destination
            config["forward"] = _forward(dest)
            self._check_destination(dest.url, dest.secret)
            sealed.update(headers=dest.headers, destination_secret=dest.secret)
            changes.update(destination_url=dest.url, timeout_seconds=dest.timeout_seconds,
                           rate_interval_us=_interval(config["forward"]), rate_tat=None)
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
            if _held_by(config) != _held_by(source.options):
                self.store.unkey(cur, source, now)  # held by the ordering it had
        return self.get(tenant_id, name)

    def resume(self, tenant_id: int, name: str) -> Shown:
        """End the source's pauses, an operator's (its time does not count toward the
        retry windows of the events it held) and a destination's (its waiting events are
        due at once), whatever their end. A source that is not paused is left as it is."""
        self._paused(tenant_id, name, lambda cur, source, now: self.store.resume(
            cur, source, now))
        return self.get(tenant_id, name)

    def pause(self, tenant_id: int, name: str, until: Optional[Micros],
              reason: Optional[str]) -> Shown:
        """An operator's pause until `until` (None: until resumed), or a new end and
        reason for the one on. Events are still accepted; none is forwarded, none fails
        meanwhile. InvalidRequest for an end not in the future or over a year ahead."""
        now = self.clock()
        if until is not None and not now < until <= now + PAUSE_AHEAD_DAYS * DAY * SECOND:
            raise errors.InvalidRequest(
                f"until is in the future and at most {PAUSE_AHEAD_DAYS} days ahead (or "
                "absent: paused until resumed)", details={"field": "until"})
        self._paused(tenant_id, name, lambda cur, source, now: self.store.pause(
            cur, source, now, until, reason))
        return self.get(tenant_id, name)

    def _paused(self, tenant_id: int, name: str, step: Callable[[Any, Source, Micros], None]
                ) -> None:
        """`step` in a transaction on the source as it is now; read and done again when
        another writer ended its pause meanwhile (PauseChanged: rolled back, so the pause's
        time is added to the windows once)."""
        def round_() -> Optional[Again]:
            source = self._named(tenant_id, name)
            try:
                with self.store.transaction() as cur:
                    step(cur, source, self.clock())
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
        try:
            sealed = self.sealer.open(source.sealed)
        except ValueError:  # shown as broken; the list never fails for one source
            return Shown(source, None, None, [], None, queue, "broken",
                         paused_of(source, self.clock()))
        return Shown(source, sealed["ingest_id"], len(sealed["secrets"]),
                     sorted(sealed.get("headers") or {}),
                     bool(sealed.get("destination_secret")), queue,
                     "failing" if source.last_error else "ok",
                     paused_of(source, self.clock()))

    def _provider(self, name: str) -> providers.Provider:
        if name not in providers.names():
            raise errors.InvalidRequest(
                f"the provider is one of {', '.join(providers.names())}",
                details={"field": "provider"})
        return providers.provider(name)

    def _check_destination(self, url: str, secret: Optional[str]) -> None:
        try:
            self.outbound.check(url)
        except destinations.Refused as exc:
            raise errors.InvalidRequest(str(exc), details={"field": "destination.url"}) \
                from None
        if secret is not None:
            try:
                providers.provider("standard").check_secret(secret)
            except providers.BadSecret as exc:
                raise errors.InvalidRequest(f"destination.secret: {exc}",
                                            details={"field": "destination.secret"}) from None


def _plain(model: Any) -> Optional[dict]:
    """A validated model as the plain dict it is stored as (None stays None)."""
    if model is None or isinstance(model, dict):
        return model
    return model.model_dump(by_alias=True, exclude_none=True)


def _config(provider: str, signature: Optional[dict], event_id: Optional[dict],
            event_type: Optional[dict] = None) -> dict:
    """The provider options: only `generic` takes a signature rule, an event-id rule and
    an event-type rule (optional: without one its events have no type)."""
    if provider != "generic":
        if signature is not None or event_id is not None or event_type is not None:
            raise errors.InvalidRequest("signature, event_id and event_type are for generic "
                                        "sources", details={"field": "signature"})
        return {}
    if event_id is None or ("header" in event_id) == ("json" in event_id):
        raise errors.InvalidRequest("a generic source's event_id is {\"header\": NAME} or "
                                    "{\"json\": [JSON pointers]}", details={"field": "event_id"})
    config = {"signature": signature, "event_id": event_id}
    if event_type is not None:
        config["event_type"] = event_type
    try:
        providers.provider(provider).validate_config(config)
    except ValueError as exc:
        raise errors.InvalidRequest(str(exc), details={"field": "event_id"}) from None
    return config


def _check_secrets(provider: providers.Provider, signing: list[str], config: dict) -> None:
    if not provider.needs_secret(config):
        if signing:
            raise errors.InvalidRequest("a generic source without a signature takes no secrets",
                                        details={"field": "secrets"})
        return
    if not signing:
        raise errors.InvalidRequest("this provider signs its webhooks: give its signing "
                                    "secret (two during a rotation)",
                                    details={"field": "secrets"})
    for n, secret in enumerate(signing):
        try:
            provider.check_secret(secret)
        except providers.BadSecret as exc:
            raise errors.InvalidRequest(f"secrets.{n}: {exc}",
                                        details={"field": f"secrets.{n}"}) from None


def _forward(dest: Any) -> dict:
    """The destination's forwarding choices kept with the source's options: its filter and
    its ordering (each absent when it has none) in route_specs' normal form. InvalidRequest
    naming the field for a filter or an ordering route_specs refuses."""
    forward = {"retry_statuses": sorted(set(dest.retry_statuses)),
               "delivered_header": dest.delivered_header}
    if dest.rate is not None:
        forward["rate"] = _rate(dest.rate)
    if dest.filter is not None:
        try:
            parsed = route_specs.parse_filter(dest.filter, at="destination.filter")
        except route_specs.RouteError as exc:
            raise errors.InvalidRequest(str(exc), details={"field": "destination.filter"}) \
                from None
        forward["filter"] = route_specs.filter_json(parsed)
    if dest.ordering is not None:
        forward["ordering"] = route_specs.ordering_json(_ordering(dest.ordering))
    return forward


def _ordering(given: Any) -> Ordering:
    """A destination's ordering read by route_specs."""
    at = "destination.ordering"
    try:
        parsed = route_specs.parse_ordering(given, at=at)
    except route_specs.RouteError as exc:
        raise errors.InvalidRequest(str(exc), details={"field": at}) from None
    return parsed


def _held_by(config: dict) -> tuple[Optional[str], Optional[str]]:
    """The key pointer and mode of the ordering in `config` (stored options) that the take
    holds events by (gateway/ordering.py), or (None, None)."""
    given = config.get("forward", {}).get("ordering") or {}
    return given.get("key"), given.get("mode")


def _check_ttl(ttl: int, retry_window: int) -> None:
    if ttl < retry_window + DAY:
        raise errors.InvalidRequest(
            "ttl_seconds must be at least retry_window_seconds plus a day: an event id is "
            "never forgotten while its forwarding is still retried",
            details={"field": "ttl_seconds", "minimum": retry_window + DAY})


def _rate(given: Any) -> dict:
    """A destination's rate in its normal form ({"per_second": n} or {"per_minute": n});
    InvalidRequest naming the field (destination.rate.per_second: ...) for one route_specs
    refuses."""
    if isinstance(given, dict):  # JSON has one number type: 5.0 is 5, as Int reads it
        given = {k: int(v) if isinstance(v, float) and v.is_integer() else v
                 for k, v in given.items()}
    try:
        rate = route_specs.parse_rate(given, at="destination.rate")
    except route_specs.RouteError as exc:
        raise errors.InvalidRequest(str(exc), details={"field": "destination.rate"}) from None
    return {"per_second" if rate.per_seconds == 1 else "per_minute": rate.count}


def _interval(forward: dict) -> Optional[int]:
    """The microseconds between two forwards at the destination's rate (None: no rate), as
    the take's GCRA reads them (storage/take.py): rounded up, so the rate is never exceeded
    (7/s: 142,858 us)."""
    rate = forward.get("rate")
    if rate is None:
        return None
    per, count = (1, rate["per_second"]) if "per_second" in rate else (60, rate["per_minute"])
    return -(-per * SECOND // count)
