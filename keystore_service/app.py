"""create_app(): the Flask app over what bootstrap.build made (settings, database, stores,
service, gateway): the views, the error handlers and the per-request hooks.

No side effects at import. `gunicorn 'keystore_service.app:create_app()'` works, and so does
`keystore serve`, which also migrates the database once before the workers start.
"""
from __future__ import annotations

import logging
import time
from typing import Optional

from flask import Flask, Response, g, request

from keystore_service import bootstrap, errors, logs
from keystore_service.domain import canonical
from keystore_service.service import metrics
from keystore_service.service.claims import Clock, system_clock
from keystore_service.service.jobs import Timer
from keystore_service.settings import Settings, load
from keystore_service.web import errors as web_errors
from keystore_service.web import forwarded
from keystore_service.web.api import bodies, openapi
from keystore_service.web.api.render import current_request_id, respond
from keystore_service.web.context import EXTENSION, Keystore
from keystore_service.web.ui import ui

log = logging.getLogger("keystore")
access_log = logging.getLogger("keystore.access")


def create_app(settings: Optional[Settings] = None, clock: Clock = system_clock, *,
               background_jobs: bool = False, threads: int = 4) -> Flask:
    """The Flask app. `background_jobs=True` (as `keystore serve` does) also starts the
    reconciler and sweeper timer of this process; `threads` is the worker's thread count."""
    settings = settings or load()
    app = Flask("keystore_service")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.json.sort_keys = False
    keystore = app.extensions[EXTENSION] = bootstrap.build(settings, clock, threads)

    if settings.access_log:  # first: its clock starts before anything can refuse
        _access_log(app, keystore)
    _whole_bodies(app)  # then: everything after it sees a body of known length
    from keystore_service.web.api.api import authenticate, bp
    from keystore_service.web.api.bulk_api import bp as bulk_bp
    from keystore_service.web.api.connection_api import v1 as connections_v1
    from keystore_service.web.api.gateway_api import inbound, v1
    from keystore_service.web.api.issues_api import v1 as issues_v1
    from keystore_service.web.api.send_api import v1 as send_v1
    app.register_blueprint(bp)
    app.register_blueprint(v1)
    app.register_blueprint(issues_v1)
    app.register_blueprint(bulk_bp)
    app.register_blueprint(connections_v1)
    app.register_blueprint(send_v1)
    app.register_blueprint(inbound)
    ui.init_app(app)
    _service_endpoints(app, keystore)
    web_errors.install_app(app)
    _request_metrics(app, keystore)
    app.before_request(_v1_token_first(authenticate))  # after the clocks and the access log
    if background_jobs:
        app.extensions["keystore_timer"] = Timer(
            keystore.jobs, settings.reconcile_interval_seconds,
            settings.sweep_interval_seconds).start()
        if settings.relay_in_serve:
            keystore.gateway.start_relay(settings)
        keystore.gateway.bulk.watch()  # bulk jobs whose runner's process died
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


def _service_endpoints(app: Flask, keystore: Keystore) -> None:
    @app.get("/healthz")
    def healthz():
        return respond({"status": "ok"})

    @app.get("/readyz")
    def readyz():
        keystore.database.ping()  # Unavailable -> 503
        return respond({"status": "ready"})

    spec = openapi.document()

    @app.get("/metrics")
    def prometheus():
        body = metrics.exposition(keystore.service.observer.gauges, keystore.service.clock,
                                  keystore.settings.metrics_max_scopes)
        body += keystore.gateway.alerts.gauges.exposition()  # issues and notices
        return Response(body, 200, mimetype="text/plain", headers={
            "Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    if keystore.settings.bench_noop:
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


def _request_metrics(app: Flask, keystore: Keystore) -> None:
    observed = keystore.metrics

    @app.before_request
    def _clock_in() -> None:
        g.t0 = time.perf_counter()

    @app.teardown_request
    def _clock_out(_exc) -> None:
        started = g.get("t0")
        if started is not None:
            rule = request.url_rule
            observed.request(rule.rule if rule else "unmatched", time.perf_counter() - started)


def _access_log(app: Flask, keystore: Keystore) -> None:
    """One line per answer. Registered before every other before_request, so its clock is
    set before one of them can refuse (a chunked body over the limit raised 413 before it,
    and the line's g.started was missing: 500, issue 25 item 9); a line without its clock
    shows `-` for the time rather than failing the answer. Paths under /hooks/ show at most
    4 characters of the ingest id (logs.path_shown)."""
    trusted = forwarded.parse_trusted(keystore.settings.forwarded_allow_ips)

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
