"""Run the app under gunicorn from `keystore serve` (gthread workers, app built per worker)."""
from __future__ import annotations

import json
import os
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.http import errors as http_errors
from gunicorn.util import write_nonblock
from gunicorn.workers.gthread import ThreadWorker

from . import errors, logs
from .settings import Settings


def default_workers() -> int:
    return max(2, 2 * (os.cpu_count() or 1))


class Server(BaseApplication):
    """Each worker builds its own app, engine and pool after the fork: no connection is
    ever shared between processes (and `post_fork` would dispose any that were)."""

    def __init__(self, settings: Settings, host: str, port: int, workers: int, threads: int,
                 **extra: Any):
        self.settings = settings
        self.options = {
            "bind": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
            "workers": workers, "worker_class": WORKER_CLASS, "threads": threads,
            "preload_app": False, "timeout": 60, "graceful_timeout": 20, "keepalive": 5,
            "accesslog": None, "errorlog": "-", "loglevel": settings.log_level.lower(),
            "proc_name": "keystore", **extra,
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
        self.cfg.set("post_fork", _dispose_inherited_pools)
        self.cfg.set("child_exit", _worker_exited)

    def load(self):
        from .app import create_app
        return create_app(self.settings, background_jobs=True,
                          threads=self.options["threads"])


def _dispose_inherited_pools(_server: Any, worker: Any) -> None:
    app = getattr(worker, "wsgi", None)
    keystore = getattr(app, "extensions", {}).get("keystore") if app else None
    if keystore is not None:
        keystore.database.engine.dispose(close=False)


def _worker_exited(_server: Any, worker: Any) -> None:
    from .metrics import worker_exit
    worker_exit(worker.pid)


WORKER_CLASS = "keystore_service.server.EnvelopeWorker"


class EnvelopeWorker(ThreadWorker):
    """gunicorn's gthread worker, whose own refusals (a request line or headers too large, a
    malformed request) answer in the contract's error envelope instead of an HTML page, and
    are logged by the error's class alone: gunicorn's text quotes the request (issue 13,
    item 15)."""

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        error = _refusal(exc)
        if isinstance(error, errors.InternalError):
            self.log.error("error handling a request: %s\n%s", type(exc).__name__,
                           logs.describe(type(exc), exc, exc.__traceback__))
        else:
            self.log.warning("invalid request from %s: %s", (addr or ("-",))[0],
                             type(exc).__name__)
        body = json.dumps({"error": {"code": error.code, "message": error.message,
                                     "details": {}}}).encode()
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
