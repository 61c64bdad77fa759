"""A destination's forwarding choices as the relay reads them for every forward: opened
once (its sealed part is a Fernet decryption, its options JSON) and kept while the rows it
comes from stay the same (gateway/forwarding.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from keystore_service.domain.routing import Filter, Ordering
from keystore_service.gateway import ordering, rules
from keystore_service.service.sealing import Sealer
from keystore_service.storage.sources import Source


@dataclass(frozen=True, slots=True)
class Route:
    """What every forward to a destination needs."""

    secret: Optional[str]  # the destination's signing secret
    headers: dict[str, str]  # the destination's configured headers
    forward: dict  # the forwarding options: delivered_header, retry_statuses, filter
    broken: bool = False  # no configured key opens the source's secrets (issue 25)
    filter: Optional[Filter] = None  # the destination's, parsed once; None: takes every event
    unusable: Optional[str] = None  # why the stored filter cannot be read (then: retried)
    ordering: Optional[Ordering] = None  # newer_wins, parsed once (gateway/ordering.py)


class Routes:
    def __init__(self, sealer: Sealer):
        self.sealer = sealer
        self._routes: dict[tuple, Route] = {}

    def of(self, source: Source) -> Route:
        """The destination's Route: its own options and sealed secrets when it has them (a
        destination after the first), else its source's (the v1.1 destination's)."""
        key = (source.sealed, source.config, source.destination_sealed,
               source.destination_config)
        found = self._routes.get(key)
        if found is None:
            if len(self._routes) >= 1_000:  # bounds memory with many sources
                self._routes.clear()
            forward = source.forward
            given, unusable = rules.read_filter(forward)
            order = ordering.read_ordering(forward)
            try:
                sealed = self.sealer.open(source.destination_sealed or source.sealed)
            except ValueError:  # a key since removed: its forwards fail and are retried
                return Route(None, {}, forward, broken=True, filter=given, unusable=unusable,
                             ordering=order)
            found = self._routes[key] = Route(sealed.get("destination_secret"),
                                              sealed.get("headers") or {}, forward,
                                              filter=given, unusable=unusable, ordering=order)
        return found
