"""The inbound webhook gateway's parts as one value, built once per process by
bootstrap.build_gateway: the sealer, sources, ingest (with its per-source rate buckets),
deliveries, forwarding, and the relay that `keystore serve` runs in each worker and
`keystore relay` runs alone."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from keystore_service.gateway.alerts import AlertLoop, Alerts
from keystore_service.gateway.bulk import Bulk
from keystore_service.gateway.channels import Channels
from keystore_service.gateway.connections import Connections
from keystore_service.gateway.deliveries import Deliveries
from keystore_service.gateway.forwarding import Forwarding
from keystore_service.gateway.ingest import Ingest
from keystore_service.gateway.issues import Issues
from keystore_service.gateway.relay import Relay
from keystore_service.gateway.send_loop import SendLoop
from keystore_service.gateway.sender import Sender
from keystore_service.gateway.sending import Sending
from keystore_service.gateway.settlement import Checker, Settlement
from keystore_service.gateway.settlement_pass import SettlementLoop, SettlementPass
from keystore_service.gateway.sources import Sources
from keystore_service.service.sealing import Sealer
from keystore_service.settings import Settings
from keystore_service.storage.settlements import ScopeSettlementStore


@dataclass
class Gateway:
    sealer: Sealer
    sources: Sources
    ingest: Ingest
    deliveries: Deliveries
    forwarding: Forwarding
    listen_url: Optional[str] = None  # PostgreSQL's libpq URL for the relay's LISTEN
    relay: Optional[Relay] = None
    # Issues and alerts (alerts.py): the watchers, the channels, the notices' sender and
    # its loop, which runs beside the relay.
    issues: Optional[Issues] = None
    channels: Optional[Channels] = None
    alerts: Optional[Alerts] = None
    alert_loop: Optional[AlertLoop] = None
    bulk: Optional[Bulk] = None  # the bulk actions (bootstrap.build: they need Operations)
    # Outbound (issue 28): the tenants' connections, and the scopes' settlements
    connections: Optional[Connections] = None
    settlements: Optional[ScopeSettlementStore] = None
    # Settlement by asking the destination (settlement.py): a check's run, its verdict
    # applied to a record, and the pass over plain claims that runs beside the relay.
    checker: Optional[Checker] = None
    settlement: Optional[Settlement] = None
    settlement_pass: Optional[SettlementPass] = None
    settlement_loop: Optional[SettlementLoop] = None
    # POST /v1/send (sending.py) and the sender that makes the sends (sender.py), whose
    # loop runs beside the relay.
    sending: Optional[Sending] = None
    sender: Optional[Sender] = None
    send_loop: Optional[SendLoop] = None

    def wake_sender(self) -> None:
        """A send was queued in this process: its sender looks at once (others within 1 s)."""
        if self.send_loop is not None:
            self.send_loop.wake()

    def wake(self) -> bool:
        """Wake this process's relay; True when it runs and has a free slot."""
        return self.relay is not None and self.relay.wake()

    def start_relay(self, settings: Settings, holder: Optional[str] = None) -> Relay:
        self.relay = Relay(self.forwarding, settings.relay_concurrency, holder,
                           self.listen_url).start()
        if self.alerts is not None:  # beside it, and stopped with it (Relay.stop)
            relay = self.relay
            self.alert_loop = self.alerts.start(settings.alert_watch_seconds,
                                                alive=lambda: not relay._stop.is_set())
        if self.settlement_pass is not None:  # beside it too, and stopped with it
            relay = self.relay
            self.settlement_loop = SettlementLoop(
                self.settlement_pass, alive=lambda: not relay._stop.is_set()).start()
        if self.sender is not None:  # beside it too, and stopped with it
            relay = self.relay
            self.send_loop = SendLoop(self.sender, settings.relay_concurrency,
                                      self.relay.holder,
                                      alive=lambda: not relay._stop.is_set()).start()
        return self.relay
