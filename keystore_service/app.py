"""create_app(): the one place where settings, database, store, service and views meet.

No side effects at import. `gunicorn 'keystore_service.app:create_app()'` works, and so does
`keystore serve`, which also migrates the database once before the workers start.
"""
from __future__ import annotations

import atexit
import logging
import time
from dataclasses import dataclass
from typing import Optional

from flask import Flask, Response, g, request

from keystore_service import errors, gateway, logs
from keystore_service.domain import canonical
from keystore_service.service import metrics
from keystore_service.service.auth import Authenticator
from keystore_service.service.batch import BatchClaims
from keystore_service.service.claims import Clock, KeyStoreService, system_clock
from keystore_service.service.counting import RepeatCounts
from keystore_service.service.jobs import Jobs, Timer
from keystore_service.service.operations import Operations
from keystore_service.service.waiting import WaitSeats
from keystore_service.settings import Settings, load
from keystore_service.storage import db
from keystore_service.storage.accounts import Accounts
from keystore_service.storage.gauges import Gauges
from keystore_service.storage.oversight import Oversight
from keystore_service.storage.ratelimit import RateLimiter
from keystore_service.storage.records import RecordStore
from keystore_service.storage.reports import Reports
from keystore_service.storage.reviews import ReviewStore
from keystore_service.storage.secrets import SecretStore
from keystore_service.storage.traces import TraceStore
from keystore_service.web import errors as web_errors
from keystore_service.web import forwarded
from keystore_service.web.api import bodies, openapi
from keystore_service.web.api.render import current_request_id, respond
from keystore_service.web.ui import ui

log = logging.getLogger("keystore")
access_log = logging.getLogger("keystore.access")


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
    gateway: gateway.Gateway


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
    ks = Keystore(settings, database, service, accounts,
                    Authenticator(accounts, settings.token_cache_seconds),
                    BatchClaims(service), Operations(service),
                    Jobs(service, settings.keep_finished_seconds,
                         settings.keep_unresolved_seconds, settings.keep_report_days),
                    Reports(database), observed,
                    RateLimiter(database, settings.rate_limit_requests,
                                settings.rate_limit_window_seconds, clock),
                    Oversight(database), SecretStore(database),
                    WaitSeats.for_threads(threads, settings.wait_share,
                                          settings.wait_token_share),
                    gateway.build(settings, database, records, reviews, accounts, clock,
                                  observed))
    ks.jobs.also.append(ks.gateway.forwarding.events.drop_old_bodies)
    return ks


def _repeat_counts(settings: Settings, records: RecordStore) -> Optional[RepeatCounts]:
    """Repeats counted after the answer, written within a second and at the process's exit."""
    if not settings.async_repeat_counts:
        return None
    counts = RepeatCounts(records.add_repeat_counts)
    atexit.register(counts.close)
    return counts


def create_app(settings: Optional[Settings] = None, clock: Clock = system_clock, *,
               background_jobs: bool = False, threads: int = 4) -> Flask:
    """The Flask app. `background_jobs=True` (as `keystore serve` does) also starts the
    reconciler and sweeper timer of this process; `threads` is the worker's thread count."""
    settings = settings or load()
    app = Flask("keystore_service")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.json.sort_keys = False
    keystore = app.extensions["keystore"] = build(settings, clock, threads)

    if settings.access_log:  # first: its clock starts before anything can refuse
        _access_log(app)
    _whole_bodies(app)  # then: everything after it sees a body of known length
    from keystore_service.web.api.api import authenticate, bp
    from keystore_service.web.api.hooks_api import inbound, v1
    app.register_blueprint(bp)
    app.register_blueprint(v1)
    app.register_blueprint(inbound)
    ui.init_app(app)
    _service_endpoints(app)
    web_errors.install_app(app)
    _request_metrics(app)
    app.before_request(_v1_token_first(authenticate))  # after the clocks and the access log
    if background_jobs:
        app.extensions["keystore_timer"] = Timer(
            keystore.jobs, settings.reconcile_interval_seconds,
            settings.sweep_interval_seconds).start()
        if settings.relay_in_serve:
            keystore.gateway.start_relay(settings)
    return app


def _whole_bodies(app: Flask) -> None:
    limit = app.config["MAX_CONTENT_LENGTH"]

    @app.before_request
    def _buffer_chunked() -> None:
        if not request.path.startswith("/hooks/"):  # the ingest reads it after its 404
            bodies.buffer_chunked(request.environ, limit)

    @app.after_request
    def _read_the_rest(resp: Response) -> Response:
        """A refused request's unread body is read before the answer goes (bounded), so a
        keep-alive client sees the answer, not a reset; past the bound, say we close."""
        if resp.status_code >= 400 and not bodies.drain(request.environ):
            resp.headers["Connection"] = "close"
        return resp


def _v1_token_first(authenticate):
    def check() -> None:
        if request.path == "/v1" or request.path.startswith("/v1/"):
            authenticate()
    return check


def _service_endpoints(app: Flask) -> None:
    @app.get("/healthz")
    def healthz():
        return respond({"status": "ok"})

    @app.get("/readyz")
    def readyz():
        app.extensions["keystore"].database.ping()  # Unavailable -> 503
        return respond({"status": "ready"})

    spec = openapi.document()

    @app.get("/metrics")
    def prometheus():
        ks = app.extensions["keystore"]
        body = metrics.exposition(ks.service.events.gauges, ks.service.clock,
                                  ks.settings.metrics_max_scopes)
        return Response(body, 200, mimetype="text/plain", headers={
            "Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    if app.extensions["keystore"].settings.bench_noop:
        @app.post("/bench/noop")
        def bench_noop():
            try:
                body = canonical.parse_json_object(request.get_data(cache=False))
            except ValueError as exc:
                raise errors.InvalidRequest(str(exc)) from None
            return respond({"ok": True, "fields": len(body)})

    @app.get("/openapi.json")
    def openapi_json():
        return respond(spec)


def _request_metrics(app: Flask) -> None:
    observed = app.extensions["keystore"].metrics

    @app.before_request
    def _clock_in() -> None:
        g.t0 = time.perf_counter()

    @app.teardown_request
    def _clock_out(_exc) -> None:
        started = g.get("t0")
        if started is not None:
            rule = request.url_rule
            observed.request(rule.rule if rule else "unmatched", time.perf_counter() - started)


def _access_log(app: Flask) -> None:
    """One line per answer. Registered before every other before_request, so its clock is
    set before one of them can refuse (a chunked body over the limit raised 413 before it,
    and the line's g.started was missing: 500, issue 25 item 9); a line without its clock
    shows `-` for the time rather than failing the answer. Paths under /hooks/ show at most
    4 characters of the ingest id (logs.path_shown)."""
    trusted = forwarded.parse_trusted(app.extensions["keystore"].settings.forwarded_allow_ips)

    @app.before_request
    def _start() -> None:
        g.started = time.perf_counter()

    @app.after_request
    def _log(resp):
        principal = g.get("principal")
        client = forwarded.client_address(request.remote_addr,
                                          request.headers.get("X-Forwarded-For"), trusted)
        started = g.get("started")
        took = "-" if started is None else f"{(time.perf_counter() - started) * 1000:.1f}"
        access_log.info('"%s %s" %s %sms tenant=%s request=%s client=%s', request.method,
                        logs.path_shown(request.path), resp.status_code, took,
                        principal.tenant if principal else "-", current_request_id(), client)
        return resp
