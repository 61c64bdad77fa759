"""build(): the composition root. Every store, service and gateway part of a process is made
here, once, from its settings, and handed to the entry points (the Flask app, the relay of
`keystore relay`, the CLI's commands that need the whole service). Nothing else constructs
a store for a running process."""
from __future__ import annotations

import atexit
import functools
import secrets
from typing import Any, Optional

from requests.certs import where as ca_bundle

from keystore_service import sealing_keys
from keystore_service.gateway import mail
from keystore_service.gateway.admission import Admission
from keystore_service.gateway.alerts import Alerts, report_text
from keystore_service.gateway.assembly import Gateway
from keystore_service.gateway.bulk import Bulk
from keystore_service.gateway.channels import Channels
from keystore_service.gateway.connections import Connections
from keystore_service.gateway.deliveries import Deliveries
from keystore_service.gateway.destinations import Policy
from keystore_service.gateway.forwarding import Forwarding
from keystore_service.gateway.ingest import Ingest
from keystore_service.gateway.issues import Issues
from keystore_service.gateway.outbound import Outbound
from keystore_service.gateway.sender import Sender
from keystore_service.gateway.sending import Sending
from keystore_service.gateway.settlement import Checker, Settlement
from keystore_service.gateway.settlement_pass import SettlementPass
from keystore_service.gateway.sources import Sources
from keystore_service.service import metrics
from keystore_service.service.alert_metrics import AlertGauges
from keystore_service.service.auth import Authenticator
from keystore_service.service.batch import BatchClaims
from keystore_service.service.claims import Clock, KeyStoreService, system_clock
from keystore_service.service.counting import RepeatCounts
from keystore_service.service.jobs import Jobs
from keystore_service.service.operations import Operations
from keystore_service.service.waiting import WaitSeats
from keystore_service.settings import Settings
from keystore_service.storage import db
from keystore_service.storage.accounts import Accounts
from keystore_service.storage.alert_history import AlertHistory
from keystore_service.storage.alerts import AlertStore
from keystore_service.storage.bulk import BulkStore
from keystore_service.storage.connections import ConnectionStore
from keystore_service.storage.events import HookStore
from keystore_service.storage.gauges import Gauges
from keystore_service.storage.issues import IssueStore
from keystore_service.storage.maintenance import Maintenance
from keystore_service.storage.oversight import Oversight
from keystore_service.storage.ratelimit import RateLimiter
from keystore_service.storage.records import RecordStore
from keystore_service.storage.record_checks import RecordCheckStore
from keystore_service.storage.reports import Reports
from keystore_service.storage.reviews import ReviewStore
from keystore_service.storage.secrets import SecretStore
from keystore_service.storage.sends import SendStore
from keystore_service.storage.send_trail import SendTrails
from keystore_service.storage.sessions import SignIns
from keystore_service.storage.settlements import ScopeSettlementStore
from keystore_service.storage.sources import SourceStore
from keystore_service.storage.traces import TraceStore
from keystore_service.storage.versions import VersionStore
from keystore_service.web.api.render import rfc3339
from keystore_service.web.context import Keystore
from keystore_service.web.ui.ui_session import MAX_SESSION_SECONDS, Sessions

SESSION_KEY_NAME = "ui_session_key"  # the page's cookie key, kept in the database


def build(settings: Settings, clock: Clock = system_clock, threads: int = 4) -> Keystore:
    """Everything a process needs; `threads` is the worker's thread count (the share of
    them that may wait is taken from it)."""
    engine = db.create(settings.database_url, pool_size=settings.pool_size,
                       sqlite_busy_timeout_ms=settings.sqlite_busy_timeout_ms,
                       sqlite_synchronous=settings.sqlite_synchronous)
    database = db.Database(engine, settings.sqlite_busy_timeout_ms / 1000)
    accounts, records = Accounts(database), RecordStore(database)
    observed = metrics.Metrics(settings.metrics_max_scopes, Gauges(database))
    reviews = ReviewStore(database)
    service = KeyStoreService(records, reviews, clock, observed, traces=TraceStore(database),
                              late_window_seconds=settings.late_repeat_window_seconds,
                              group_commit=settings.group_commit,
                              counts=_repeat_counts(settings, records))
    stored, reports = SecretStore(database), Reports(database)
    ks = Keystore(settings, database, service, accounts,
                  Authenticator(accounts, settings.token_cache_seconds),
                  BatchClaims(service), Operations(service),
                  Jobs(service, reports, Maintenance(database), settings.keep_finished_seconds,
                       settings.keep_unresolved_seconds, settings.keep_report_days),
                  reports, observed,
                  RateLimiter(database, settings.rate_limit_requests,
                              settings.rate_limit_window_seconds, clock),
                  Oversight(database), stored,
                  WaitSeats.for_threads(threads, settings.wait_share, settings.wait_token_share),
                  build_gateway(settings, database, records, reviews, accounts, clock, observed),
                  Sessions(lambda: stored.get_or_create(SESSION_KEY_NAME,
                                                        lambda: secrets.token_urlsafe(48)),
                           settings.ui_idle_minutes * 60, clock),
                  # a row is needed while its session may live, plus an hour: instances'
                  # clocks may differ
                  SignIns(database, MAX_SESSION_SECONDS + 3600))
    ks.jobs.sweep_steps.append(ks.gateway.forwarding.events.drop_old_bodies)
    ks.send_trails = SendTrails(database)
    ks.gateway.bulk = Bulk(BulkStore(database), ks.gateway.deliveries, ks.operations, clock,
                          per_second=settings.bulk_events_per_second)
    build_alerts(ks.gateway, settings, database, reports, clock)
    ks.jobs.sweep_steps.append(AlertHistory(database, settings.keep_issues_days).forget)
    ks.gateway.settlement_pass = SettlementPass(  # one process at a time: the job lock
        ks.gateway.checker, ks.gateway.settlement, ks.gateway.settlement.checks,
        ks.gateway.connections.store.by_id, clock, lock=ks.jobs.try_lock)
    build_sends(ks, clock)
    return ks


def build_sends(ks: Keystore, clock: Clock) -> None:
    """POST /v1/send's use case and the sender beside the relay (issue 28)."""
    gateway, sends = ks.gateway, SendStore(ks.database)
    gateway.sending = Sending(ks.service, gateway.connections.store, sends, gateway.sealer,
                              clock, ks.settings.default_ttl_seconds,
                              wake=gateway.wake_sender)
    gateway.sender = Sender(sends, gateway.connections, ks.service.records, ks.service.reviews,
                            gateway.sealer, gateway.forwarding.outbound, gateway.settlement,
                            clock, ks.metrics,
                            functools.lru_cache(maxsize=4096)(ks.accounts.tenant_name))


def build_gateway(settings: Settings, database: db.Database, records: RecordStore,
                  reviews: ReviewStore, accounts: Accounts, clock: Clock,
                  observed: Any) -> Gateway:
    """The gateway's parts, sharing one outbound client (its rules, its deadline)."""
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
    outbound = Outbound(Policy(settings.hook_destinations, settings.hook_allow_link_local),
                        ca_certs=ca_bundle())
    forwarding = Forwarding(sources, events, records, reviews, sealer, clock,
                            tenant_name, observed=observed, outbound=outbound,
                            versions=VersionStore(database))
    listen_url = None if events.sqlite else db.libpq_url(settings.database_url)
    gateway = Gateway(sealer, Sources(sources, sealer, clock, outbound=outbound),
                      ingest, deliveries, forwarding, listen_url)
    gateway.settlements = ScopeSettlementStore(database)
    gateway.connections = Connections(ConnectionStore(database), gateway.settlements, sealer,
                                      outbound, clock)
    gateway.checker = Checker(outbound, gateway.connections)
    gateway.settlement = Settlement(records, reviews, RecordCheckStore(database), observed,
                                    tenant_name)
    return gateway


def build_alerts(gateway: Gateway, settings: Settings, database: db.Database,
                 reports: Reports, clock: Clock) -> None:
    """Issues, channels and the notices' sender, on the gateway's sealer and outbound
    client (the same address rules and deadline as forwards)."""
    store = AlertStore(database)
    smtp = mail.parse(settings.smtp_url.get_secret_value()) if settings.smtp_url else None
    issues = IssueStore(database)
    gateway.issues = Issues(issues, store, gateway.sealer, clock, rfc3339,
                            settings.public_url or "")
    gateway.channels = Channels(store, gateway.sealer, gateway.forwarding.outbound, clock,
                                smtp is not None)
    gateway.alerts = Alerts(gateway.issues, store, gateway.sealer, gateway.forwarding.outbound,
                            clock, smtp, report_text(reports), AlertGauges(issues, store))


def _repeat_counts(settings: Settings, records: RecordStore) -> Optional[RepeatCounts]:
    """Repeats counted after the answer, written within a second and at the process's exit."""
    if not settings.async_repeat_counts:
        return None
    counts = RepeatCounts(records.add_repeat_counts)
    atexit.register(counts.close)
    return counts
