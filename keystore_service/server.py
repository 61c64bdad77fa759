"""Serving under gunicorn: what `keystore serve` and the config module for running gunicorn
yourself (`gunicorn_conf.py`) both set up. gthread workers, the app (with its background jobs)
built per worker after the fork, the database migrated and the first operator token printed
once before the workers start, and one metrics directory shared by the workers and removed
when the server exits."""
from __future__ import annotations

import atexit
import errno
import json
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.http import errors as http_errors
from gunicorn.util import write_nonblock

from keystore_service import errors, logs, sealing_keys
from keystore_service.service.claims import system_clock
from keystore_service.settings import Settings, load
from keystore_service.slow_clients import DeadlineWorker
from keystore_service.storage import migrate
from keystore_service.storage.accounts import Accounts
from keystore_service.storage.db import Database, create
from keystore_service.web.errors import error_json

# metrics.MULTIPROC_ENV, not imported from there: importing prometheus_client before this is
# set would fix its value class to single-process in the master, and in every worker.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# Per worker: a claim mostly waits on the database, and a thread that waits is cheap. 16 lets
# group commit form groups (4 x 16 beat 4 x 4 and 2 x 32 on every claim scenario, at ~125 MB
# a worker instead of ~103: bench/NOTES.md, "Group commit and thread layouts").
THREADS = 16
# gunicorn settings of both ways of serving. timeout 60: a worker silent that long is hung
# (the longest request, a lookup with `wait`, takes 30 s); graceful_timeout 20: what requests
# in flight at a stop get to finish (claims take milliseconds), inside the 30 s that
# orchestrators commonly allow; keepalive 5: a client's next call of a burst reuses its
# connection.
# Connections one worker holds at once (pending heads, kept-alive, in its threads; past it the
# worker stops accepting and the kernel's backlog holds the rest): gunicorn's default, kept so
# that a worker's descriptors (these + slow_clients.FD_RESERVE) fit a per-process `ulimit -n`
# of 1,256; with 2 workers, 1,000 slow connections leave room for everyone else (issue 25).
WORKER_CONNECTIONS = 1000
WORKER_CLASS = "keystore_service.server.EnvelopeWorker"  # gthread, refusals as JSON (below)
OPTIONS: dict[str, Any] = {
    "worker_class": WORKER_CLASS, "threads": THREADS, "preload_app": False, "timeout": 60,
    "graceful_timeout": 20, "keepalive": 5, "accesslog": None, "errorlog": "-",
    "worker_connections": WORKER_CONNECTIONS,
    "proc_name": "keystore", "pre_request": logs.pre_request,  # no whole ingest id logged
}


def default_workers() -> int:
    return max(2, 2 * (os.cpu_count() or 1))


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def prepare_database(settings: Settings) -> str:
    """Say which database this is, create or migrate its schema (said in one line when
    something is migrated), and on a store with no tenant create tenant `default` with one
    operator token, printed once (alone on stdout). Returns the schema revision.
    Raises migrate.DatabaseProblem."""
    say(f"keystore: database {migrate.describe(settings.database_url)}")
    done = migrate.upgrade_and_tell(settings.database_url)
    if done.migrated:
        say(done.summary())
    database = Database(create(settings.database_url, pool_size=1,
                               sqlite_busy_timeout_ms=settings.sqlite_busy_timeout_ms))
    try:
        token = Accounts(database).bootstrap(system_clock())
    finally:
        database.engine.dispose()
    if token:
        say("\nFirst start: created tenant 'default' and this operator token. It is shown "
            "once; only its hash is stored:\n")
        print(f"    {token}\n", flush=True)
    sealing_keys.check_keys(settings)  # keys that cannot open the database's: no start
    return done.after


class PortTaken(Exception):
    """The address to serve on cannot be bound; the message names it and what to do."""


def check_bind(host: str, port: int) -> None:
    """Bind and release the address as gunicorn will (SO_REUSEADDR, which on Linux still
    refuses a port with a live listener), so that a taken port fails at once with one clear
    line instead of gunicorn's five "Address already in use" retries over 5 s (issue 25).
    Raises PortTaken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortTaken(f"{shown} is already in use by another process (another "
                            "`keystore serve`?): stop it, or choose another --port") from None
        reason = exc.strerror or type(exc).__name__
        raise PortTaken(f"cannot serve on {shown}: {reason}; check --host and --port") from None


def metrics_directory() -> str:
    """prometheus-client's multiprocess mode needs one directory shared by the workers, set
    before they fork (and before prometheus_client is imported), and emptied at each start.
    A directory made here is removed when this process exits (not when a worker does)."""
    path = os.environ.get(MULTIPROC_ENV)
    if not path:
        path = tempfile.mkdtemp(prefix="keystore-metrics-")
        os.environ[MULTIPROC_ENV] = path
        atexit.register(_remove_in, os.getpid(), path)
    for stale in Path(path).glob("*.db"):
        stale.unlink()
    return path


def _remove_in(owner: int, path: str) -> None:
    if os.getpid() == owner:  # forked workers inherit the handler; only the master removes
        shutil.rmtree(path, ignore_errors=True)


_worker_threads = THREADS  # set by post_fork in each worker, from gunicorn's own setting


def served_app():
    """The WSGI app of one worker, with the reconciler and sweeper timer."""
    from keystore_service.app import create_app
    return create_app(load(), background_jobs=True, threads=_worker_threads)


class Server(BaseApplication):
    """Each worker builds its own app, engine and pool after the fork: no connection is
    ever shared between processes (and `post_fork` would dispose any that were)."""

    def __init__(self, settings: Settings, host: str, port: int, workers: int, threads: int,
                 **extra: Any):
        self.settings = settings
        self.options = {
            **OPTIONS, "bind": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
            "workers": workers, "threads": threads,
            "loglevel": settings.log_level.lower(),
            # the proxies trusted for X-Forwarded-Proto (and, in app.py's access log, for
            # X-Forwarded-For): one setting for both, docs/deployment.md "TLS proxy"
            "forwarded_allow_ips": settings.forwarded_allow_ips, **extra,
        }
        super().__init__()

    def load_config(self) -> None:
        for name, value in self.options.items():
            if name in self.cfg.settings:
                self.cfg.set(name, value)
        # gunicorn >= 25.1 opens a control socket at one per-user path; instances side by
        # side would clash on it, and nothing here uses it.
        if "control_socket_disable" in self.cfg.settings:
            self.cfg.set("control_socket_disable", True)
        self.cfg.set("post_fork", post_fork)
        self.cfg.set("child_exit", child_exit)

    def load(self):
        from keystore_service.app import create_app
        return create_app(self.settings, background_jobs=True,
                          threads=self.options["threads"])


def post_fork(_server: Any, worker: Any) -> None:
    """Dispose of any pool a worker inherited (there is none unless the app was preloaded),
    and note the worker's thread count (the share of them that may wait is taken from it)."""
    global _worker_threads
    _worker_threads = worker.cfg.threads
    app = getattr(worker, "wsgi", None)
    keystore = getattr(app, "extensions", {}).get("keystore") if app else None
    if keystore is not None:
        keystore.database.engine.dispose(close=False)


def child_exit(_server: Any, worker: Any) -> None:
    """A dead worker's live gauges leave the summed metrics."""
    from keystore_service.service.metrics import worker_exit
    worker_exit(worker.pid)


def on_starting(_server: Any) -> None:
    """gunicorn's hook in the master, before any worker: the database and first start."""
    try:
        prepare_database(load())
    except migrate.DatabaseProblem as exc:
        raise SystemExit(f"keystore: {exc}") from None


class EnvelopeWorker(DeadlineWorker):
    """gunicorn's gthread worker with deadlines for slow clients (slow_clients.py, from
    KEYSTORE_HEADER_TIMEOUT_SECONDS and KEYSTORE_BODY_TIMEOUT_SECONDS), whose own refusals (a
    request line or headers too large, a malformed request) answer in docs/api.md's error
    envelope instead of an HTML page, and are logged by the error's class alone: gunicorn's
    text quotes the request (issue 13, item 15)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        settings = load()
        self.header_timeout = settings.header_timeout_seconds
        self.body_timeout = settings.body_timeout_seconds

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        error = _refusal(exc)
        if isinstance(error, errors.InternalError):
            self.log.error("error handling a request: %s\n%s", type(exc).__name__,
                           logs.describe(type(exc), exc, exc.__traceback__))
        else:
            self.log.warning("invalid request from %s: %s", (addr or ("-",))[0],
                             type(exc).__name__)
        body = json.dumps({"error": error_json(error)}).encode()  # details: none here
        head = (f"HTTP/1.1 {error.status} {_REASONS[error.status]}\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        try:
            write_nonblock(client, head.encode("latin-1") + body)
        except Exception:  # the client may be gone already; nothing else to do
            self.log.debug("could not send the error answer")


_REASONS = {400: "Bad Request", 414: "URI Too Long", 431: "Request Header Fields Too Large",
            500: "Internal Server Error"}
_CLIENT_ERRORS = tuple(getattr(http_errors, name) for name in (
    "InvalidRequestLine", "InvalidRequestMethod", "InvalidHTTPVersion", "InvalidHeader",
    "InvalidHeaderName", "InvalidProxyLine", "ForbiddenProxyRequest", "InvalidSchemeHeaders",
    "UnsupportedTransferCoding", "ObsoleteFolding", "ExpectationFailed", "InvalidChunkSize",
    "ChunkMissingTerminator", "InvalidChunkExtension", "NoMoreData")
    if hasattr(http_errors, name))


def _refusal(exc: BaseException) -> errors.KeystoreError:
    if isinstance(exc, http_errors.LimitRequestLine):
        return errors.UriTooLong()
    if isinstance(exc, http_errors.LimitRequestHeaders):
        return errors.HeadersTooLarge()
    if isinstance(exc, _CLIENT_ERRORS):
        return errors.InvalidRequest("the request is not valid HTTP")
    return errors.InternalError()
