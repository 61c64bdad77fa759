"""What the views need, built once per process by bootstrap.build, and keystore(): the one
way a view, an error handler or a page reaches it (typed, instead of a look-up by name)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from flask import current_app

if TYPE_CHECKING:  # types only: server.py imports this module before prometheus_client may
    # be imported (service.metrics; server.metrics_directory)
    from keystore_service.gateway.assembly import Gateway
    from keystore_service.service import metrics
    from keystore_service.service.auth import Authenticator
    from keystore_service.service.batch import BatchClaims
    from keystore_service.service.claims import KeyStoreService
    from keystore_service.service.jobs import Jobs
    from keystore_service.service.operations import Operations
    from keystore_service.service.waiting import WaitSeats
    from keystore_service.settings import Settings
    from keystore_service.storage import db
    from keystore_service.storage.accounts import Accounts
    from keystore_service.storage.oversight import Oversight
    from keystore_service.storage.ratelimit import RateLimiter
    from keystore_service.storage.reports import Reports
    from keystore_service.storage.secrets import SecretStore
    from keystore_service.storage.send_trail import SendTrails
    from keystore_service.storage.sessions import SignIns
    from keystore_service.web.ui.ui_session import Sessions

EXTENSION = "keystore"  # the app.extensions entry that holds it


@dataclass
class Keystore:
    """What the views need, built once per process."""

    settings: Settings
    database: db.Database
    service: KeyStoreService
    accounts: Accounts
    auth: Authenticator
    batch: BatchClaims
    operations: Operations
    jobs: Jobs
    reports: Reports
    metrics: metrics.Metrics
    limiter: RateLimiter
    oversight: Oversight
    secrets: SecretStore
    waits: WaitSeats
    gateway: Gateway
    sessions: Sessions  # the operators' page's signed cookies
    signins: SignIns  # the page's sign-ins, so a revoked token ends its sessions
    send_trails: Optional[SendTrails] = None  # what the page shows of outbound sends


def keystore() -> Keystore:
    """The Keystore of the app handling this request."""
    return current_app.extensions[EXTENSION]
