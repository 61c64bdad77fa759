"""The inbound webhook gateway's parts, built once per process (like app.build for the rest):
the sealer, sources, ingest (with its per-source rate buckets), deliveries, forwarding, and the
relay that `keystore serve` runs in each worker and `keystore relay` runs alone."""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Optional

from requests.certs import where as ca_bundle
from sqlalchemy.engine import make_url

from keystore_service import sealing_keys
from keystore_service.hooks.admission import Admission
from keystore_service.hooks.deliveries import Deliveries
from keystore_service.hooks.destinations import Policy
from keystore_service.hooks.forwarding import Forwarding
from keystore_service.hooks.ingest import Ingest
from keystore_service.hooks.outbound import Outbound
from keystore_service.hooks.relay import Relay
from keystore_service.hooks.sources import Sources
from keystore_service.service.claims import Clock
from keystore_service.service.sealing import Sealer
from keystore_service.settings import Settings
from keystore_service.storage.accounts import Accounts
from keystore_service.storage.db import Database, normalise_url
from keystore_service.storage.events import HookStore
from keystore_service.storage.records import RecordStore
from keystore_service.storage.reviews import ReviewStore
from keystore_service.storage.sources import SourceStore

log = logging.getLogger("keystore.gateway")


@dataclass
class Gateway:
    sealer: Sealer
    sources: Sources
    ingest: Ingest
    deliveries: Deliveries
    forwarding: Forwarding
    relay: Optional[Relay] = None

    def wake(self) -> bool:
        """Wake this process's relay; True when it runs and has a free slot."""
        return self.relay is not None and self.relay.wake()

    def start_relay(self, settings: Settings, holder: Optional[str] = None) -> Relay:
        url = None if self.forwarding.events.sqlite else _plain(settings.database_url)
        self.relay = Relay(self.forwarding, settings.relay_concurrency, holder, url).start()
        return self.relay


def build(settings: Settings, database: Database, records: RecordStore, reviews: ReviewStore,
          accounts: Accounts, clock: Clock, observed: Any) -> Gateway:
    sealer = sealing_keys.sealer_for(settings, database, clock)
    sources, events = SourceStore(database), HookStore(database)
    gateway: Gateway
    tenant_name = functools.lru_cache(maxsize=4096)(accounts.tenant_name)
    ingest = Ingest(sources, events, records, reviews, sealer, clock,
                    settings.token_cache_seconds, wake=lambda: gateway.wake(),
                    received=observed.hook_received, tenant_name=tenant_name,
                    group_commit=settings.group_commit,
                    admission=Admission(settings.hook_rate_limit_per_second,
                                        settings.hook_bad_signature_per_second))
    deliveries = Deliveries(sources, events, records, reviews, clock,
                            wake=lambda: gateway.wake())
    # one outbound client for every request the service makes (its rules, its deadline)
    outbound = Outbound(Policy(settings.hook_destinations, settings.hook_allow_link_local),
                        ca_certs=ca_bundle())
    forwarding = Forwarding(sources, events, records, reviews, sealer, clock,
                            tenant_name, observed=observed, outbound=outbound)
    gateway = Gateway(sealer, Sources(sources, sealer, clock, outbound=outbound),
                      ingest, deliveries, forwarding)
    return gateway


def _plain(url: str) -> str:
    """A libpq URL for psycopg.connect (LISTEN): without SQLAlchemy's +psycopg."""
    return make_url(normalise_url(url)).set(drivername="postgresql").render_as_string(
        hide_password=False)
